"""The cheat sheet (notebook 11, `teaching.cheatsheet`): each checklist item, confusion and takeaway
of the lease article with the one number from the course that proves it, measured again on small
runs.

Every `Proof` says what the article says, what this run measured (a sentence built from the
numbers), where the course shows it, and whether the numbers support the statement (`holds`):
a reader's own seed may not, and then the sheet says so instead of raising.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from sim.db.base import JobState
from sim.support.in_words import count
from sim.support.in_words import percent as pct
from sim.teaching import clocks, fencing
from sim.teaching.by_hand import Script
from sim.teaching.coverage import CLOCKS_TAGS
from sim.teaching.lessons import one_job, recovery_experiment, stalling_queue
from sim.teaching.rules_of_thumb import load_recovery, repeat_recovery
from sim.theory import closed_forms
from sim.theory.stats import mean_ci, wilson_interval

CHEAT_SHEET_TAGS = {
    "takeaway:1": "A lease is not a lock: ownership limited in time that ends by itself",
    "takeaway:2": "Taking a lease needs an atomic conditional UPDATE; read-then-write races",
    "takeaway:3": "Long jobs must renew the lease by heartbeat, or it may end early",
    "takeaway:4": (
        "The stuck watcher is a mandatory background process that recovers crashed workers' jobs"
    ),
    "rule:watcher-not-a-multiple-of-heartbeat": (
        "Avoid a watcher interval that is a multiple of the heartbeat interval"
    ),
    "rule:simulate-percentiles-and-load": (
        "Use the simulation, not the closed form, for percentiles or above light load"
    ),
}


@dataclass(frozen=True)
class Proof:
    """One line of the cheat sheet."""

    tag: str  # checklist:N, confused:..., takeaway:N, rule:...
    says: str  # what the article (or the rule) says
    measured: str  # what this run measured, in a sentence built from the numbers
    notebook: str  # where the course shows it, e.g. "02"
    holds: bool  # whether the numbers support `says`
    numbers: dict = field(default_factory=dict)  # the measured values behind `measured`, by name

    def row(self) -> str:
        """A Markdown table row: says | measured | notebook."""
        shown = self.measured if self.holds else f"**This run does not show it:** {self.measured}"
        where = (
            "the figure above"
            if self.notebook == "11"
            else f"[{self.notebook}]({_NOTEBOOKS[self.notebook]})"
        )
        return f"| {self.says} | {shown} | {where} |"


_NOTEBOOKS = {
    "01": "01-what-is-a-lease.ipynb",
    "02": "02-read-then-write-race.ipynb",
    "03": "03-heartbeats-and-zombies.ipynb",
    "04": "04-stuck-watcher-and-recovery.ipynb",
    "05": "05-duplicate-delivery.ipynb",
    "06": "06-tune-your-ttl.ipynb",
    "07": "07-how-popular-queues-recover.ipynb",
    "12": "12-clocks-and-fencing.ipynb",
}


def table(proofs: list[Proof]) -> str:
    """The proofs as one Markdown table (a rule of thumb is the course's, not the article's)."""
    said = (
        "rule of thumb"
        if all(p.tag.startswith("rule:") for p in proofs)
        else "the sources say"
        if all(p.tag.startswith("clocks:") for p in proofs)
        else "the article says"
    )
    lines = [f"| {said} | the course measured (this run) | shown in |", "|---|---|---|"]
    return "\n".join(lines + [p.row() for p in proofs])


# ---- the scenes the proofs share -----------------------------------------------------------------


def _crash_scene(seed: int, crash_at: float = 12.0):
    """01's crash with a lock and with a lease."""
    from sim import runner

    return (
        runner.run(one_job(crash_at=crash_at, lock=True, seed=seed)),
        runner.run(one_job(crash_at=crash_at, seed=seed)),
    )


def _long_jobs(seed: int):
    """03's long jobs without and with a heartbeat (every 10 s)."""
    from sim import runner
    from sim.scenario.settings import preset

    long_jobs = preset("no-heartbeat-long-jobs")
    beating = long_jobs.with_overrides(
        {"policy.heartbeat": True, "policy.heartbeat_interval": 10.0}
    )
    return runner.run(long_jobs, seed=seed), runner.run(beating, seed=seed)


# ---- the six checklist items ---------------------------------------------------------------------


def checklist(seed: int = 1, *, crash_jobs: int = 300) -> list[Proof]:
    """Items 1 to 6, each with its number."""
    from sim import runner
    from sim.scenario.settings import preset

    race = preset("read-then-write-race")
    naive = runner.run(race, seed=seed).summary
    atomic = race.with_overrides({"policy.claim": "conditional_update", "expect": []})
    fixed = runner.run(atomic, seed=seed).summary
    one = Proof(
        "checklist:1",
        "The claim is one atomic `UPDATE ... WHERE`, not read-then-write.",
        f"Read-then-write: {count(int(naive.double_claims), 'double claim')} in "
        f"{int(naive.leases)} leases, {count(int(naive.duplicate_external_effects), 'payment')} "
        "charged twice; the conditional UPDATE on the same arrivals: "
        f"{count(int(fixed.double_claims), 'double claim')}.",
        "02",
        naive.double_claims > 0 and fixed.double_claims == 0,
    )

    bare, beating = _long_jobs(seed)
    s, b = bare.summary, beating.summary
    ttl = bare.scenario.policy.lease_ttl
    longest = float((bare.leases["released_at"] - bare.leases["start"]).max())
    two = Proof(
        "checklist:2",
        "The TTL really exceeds the longest expected processing.",
        f"A {ttl:g} s TTL without heartbeat, jobs up to {longest:.3g} s: {int(s.false_expiries)} "
        f"of {int(s.leases)} leases expired under a live owner, "
        f"{count(int(s.duplicate_external_effects), 'extra charge')}.",
        "03",
        s.false_expiries > 0 and longest > ttl,
    )
    three = Proof(
        "checklist:3",
        "Long jobs renew their lease by heartbeat.",
        "The same jobs and TTL with a heartbeat every "
        f"{beating.scenario.policy.heartbeat_interval:g} s: "
        f"{count(int(b.false_expiries), 'false expiry', 'false expiries')}, {int(b.completed)} of "
        f"{int(b.jobs)} jobs completed.",
        "03",
        b.false_expiries == 0 and b.completed == b.jobs,
    )

    crashes = preset("crash-recovery").with_overrides({"workload.jobs": crash_jobs})
    watched = runner.run(crashes, seed=seed)
    orphaned = runner.run(crashes.with_overrides({"policy.watcher": False}), seed=seed)
    jobs = orphaned.table_jobs
    stuck = jobs[
        (jobs["status"] == JobState.PROCESSING) & (jobs["lease_until"] < orphaned.scenario.horizon)
    ]
    rec = watched.recoveries
    four = Proof(
        "checklist:4",
        "The stuck watcher runs periodically.",
        f"Without a watcher, {count(len(stuck), 'job')} stayed `Processing` with an expired lease "
        f"until the run ended; with one every {watched.scenario.policy.watcher_interval:g} s, "
        f"{int(rec['latency'].notna().sum())} of {count(len(rec), 'crashed job')} were claimed "
        "again.",
        "04",
        len(stuck) > 0 and len(rec) > 0 and bool(rec["latency"].notna().all()),
    )

    _, lease_run = _crash_scene(seed)
    row = lease_run.table_jobs.iloc[0]
    claims = lease_run.events.query("kind == 'claim'")
    five = Proof(
        "checklist:5",
        "`lease_owner` is stored for diagnosis.",
        f"After {claims['worker'].iloc[0]} crashed, the row names `lease_owner` = "
        f"{row.lease_owner}, the worker that took the job over.",
        "01",
        row.lease_owner == claims["worker"].iloc[-1] != claims["worker"].iloc[0],
    )
    six = Proof(
        "checklist:6",
        "`attempts` is incremented on every lease and kept.",
        f"`attempts` = {int(row.attempts)} on the row, one per claim in the event log "
        f"({count(len(claims), 'claim')}).",
        "01",
        int(row.attempts) == len(claims) >= 2,
    )
    return [one, two, three, four, five, six]


# ---- the three confusions ------------------------------------------------------------------------


def confusions(seed: int = 1) -> list[Proof]:
    from sim import runner

    lock_run, lease_run = _crash_scene(seed)
    crash = float(lease_run.events.query("kind == 'crash'")["t"].iloc[0])
    recovery = lease_run.recoveries.iloc[0]
    lock = Proof(
        "confused:lease-vs-lock",
        "A lease is not a lock: a lease expires; a lock can stay forever.",
        f"The owner crashed at {crash:g} s. With a lock the job was still not claimed again when "
        f"the run ended at {lock_run.scenario.horizon:g} s; with a lease {recovery.reclaimed_by} "
        f"took it {recovery.latency:.3g} s after the crash.",
        "01",
        bool(lock_run.recoveries["latency"].isna().all()) and recovery.latency > 0,
    )

    results = {}
    for claim in ("claim_unconditional", "claim_conditional"):
        script = Script()
        script.sql("producer", "insert_job", id=1, event_id="evt-1", payload="{}")
        for worker in ("A", "B"):
            script.sql(worker, "select_candidates", take_expired=True, limit=1)
        for worker in ("A", "B"):
            script.sql(worker, claim, id=1, owner=worker, ttl=30)
        rows = script.transcript.query("statement == @claim")["result"]
        results[claim] = int(rows.str.startswith("1 row").sum())
    race = Proof(
        "confused:read-then-write-vs-conditional-update",
        "Read-then-write is not enough; the conditional UPDATE is atomic.",
        f"Two workers read the same `Pending` job: {results['claim_unconditional']} of 2 "
        "unconditional UPDATEs returned the row (both think they own it); "
        f"{results['claim_conditional']} of 2 conditional ones did.",
        "02",
        results["claim_unconditional"] == 2 and results["claim_conditional"] == 1,
    )

    sqs = runner.run("sqs-visibility", seed=seed)
    reappeared = int(sqs.leases["false_expiry"].sum())
    nack = Proof(
        "confused:nack-vs-lease",
        "A nack or visibility timeout manages visibility; a lease keeps the job's state and "
        "attempts.",
        f"In the SQS preset {count(reappeared, 'message')} reappeared while the first consumer "
        "was still working: the broker's timer knows nothing of the job. The lease row answers "
        "*stuck? who? how many tries?* with one query.",
        "07",
        reappeared > 0,
    )
    return [lock, race, nack]


def _share(events: int, out_of: int) -> tuple[float, float, float, int]:
    """(share, 95% low, 95% high, out of): a rate measured on a small run, with its interval, so
    that the sheet's figure is read beside its sampling error (a lesson measures it on more
    runs)."""
    low, high = wilson_interval(events, out_of, 0.95)
    return events / max(1, out_of), low, high, out_of


def _rate(share: tuple[float, float, float, int], of: str) -> str:
    """'1.2% (95% interval 0.6% to 2.1%) of 1043 leases'."""
    value, low, high, n = share
    return f"{pct(value)} (95% interval {pct(low)} to {pct(high)}) of {count(n, of)}"


# ---- the four takeaways --------------------------------------------------------------------------


def takeaways(
    seed: int = 1,
    *,
    race_jobs: int = 100,
    race_replications: int = 2,
    stall_jobs: int = 300,
    recovery_replications: int = 12,
) -> list[Proof]:
    from sim import runner
    from sim.scenario.settings import preset

    _, lease_run = _crash_scene(seed)
    dead = lease_run.leases.iloc[0]
    crash = float(lease_run.events.query("kind == 'crash'")["t"].iloc[0])
    recovery = lease_run.recoveries.iloc[0]
    ends = Proof(
        "takeaway:1",
        CHEAT_SHEET_TAGS["takeaway:1"] + ".",
        f"{dead.worker} crashed at {crash:g} s and released nothing; its lease ran out by itself "
        f"at {dead.until:.4g} s and {recovery.reclaimed_by} claimed the job at "
        f"{recovery.reclaimed_at:.4g} s.",
        "01",
        dead.until > crash and recovery.reclaimed_at >= dead.until,
    )

    race = preset("read-then-write-race").with_overrides({"workload.jobs": race_jobs})
    gap = 0.02
    shares = {}
    for workers in (2, 32):
        busy = race.with_overrides({"policy.workers": workers, "policy.select_to_update_gap": gap})
        runs = [runner.run(busy, seed=seed + k) for k in range(race_replications)]
        shares[workers] = _share(
            sum(int(r.summary.double_claims) for r in runs),
            sum(int(r.summary.leases) for r in runs),
        )
    atomic = Proof(
        "takeaway:2",
        CHEAT_SHEET_TAGS["takeaway:2"] + ".",
        f"With read-then-write and a {1000 * gap:g} ms gap ({race_jobs} jobs a run, "
        f"{count(race_replications, 'run')} each): {_rate(shares[2], 'lease')} were double claims "
        f"with 2 workers and {_rate(shares[32], 'lease')} with 32: rare on a quiet queue, common "
        "on a busy one.",
        "02",
        shares[32][0] > shares[2][0],
        {"share_2": shares[2], "share_32": shares[32]},
    )

    stalling = stalling_queue(jobs=stall_jobs, seed=seed)
    rates = {}
    for beat in (False, True):
        s = runner.run(
            stalling.with_overrides({"policy.lease_ttl": 5.0, "policy.heartbeat": beat})
        ).summary
        rates[beat] = _share(int(s.false_expiries), int(s.leases))
    renew = Proof(
        "takeaway:3",
        CHEAT_SHEET_TAGS["takeaway:3"] + ".",
        f"On a queue whose workers stall ({stall_jobs} jobs, one run), at a 5 s TTL, "
        f"{_rate(rates[False], 'lease')} expired under a live owner without a heartbeat and "
        f"{_rate(rates[True], 'lease')} with one.",
        "03",
        rates[True][0] < rates[False][0],
        {"without": rates[False], "with": rates[True]},
    )

    experiment = recovery_experiment()
    p = experiment.policy
    latencies = [
        runner.run(experiment, seed=seed + k).recoveries["latency"].iloc[0]
        for k in range(recovery_replications)
    ]
    mean, low, high, n = mean_ci(latencies)
    theory = closed_forms.recovery_latency_mean(
        ttl=p.lease_ttl,
        heartbeat_interval=p.heartbeat_interval,
        poll_interval=p.poll_interval,
        watcher_interval=p.watcher_interval,
        latency=experiment.workload.statement_latency.value,
    )
    watcher = Proof(
        "takeaway:4",
        CHEAT_SHEET_TAGS["takeaway:4"] + ".",
        ("Every one" if n == recovery_replications else f"Only {n}")
        + f" of {count(recovery_replications, 'crash', 'crashes')} of a job's owner "
        + ("was" if n == recovery_replications else "were")
        + f" recovered by the watcher (every {p.watcher_interval:g} s) in {mean:.3g} s on average "
        f"(95% interval {low:.3g} to {high:.3g} s); the formula L - h/2 + W/2 + P/2 says "
        f"{theory:.3g} s.",
        "04",
        n == recovery_replications and bool(np.isfinite(low)) and low <= theory <= high,
    )
    return [ends, atomic, renew, watcher]


# ---- notebook 12: clocks and fencing -------------------------------------------------------------

DB_STEP = 30.0  # s: the step of the database's clock notebooks 12 and 11 show (three TTLs ahead)


def clocks_and_fencing(
    seed: int = 1,
    *,
    jobs: int = 300,
    lock_delays=(0.0, 60.0),
    lock_delay_seeds: int = 5,
    skews=(0.0, 6.0),
    skew_jobs: int = 200,
) -> list[Proof]:
    """Notebook 12's takeaways (coverage.CLOCKS_TAGS), each measured again on small runs (the
    lock-delay on notebook 12's fast-mode runs, fencing.lock_delay_sizes)."""

    zombies = fencing.zombie_queue(jobs=jobs, seed=seed)
    table = fencing.protection_table(fencing.protection_runs(zombies, seeds=(seed,)))
    alone, fenced = table.loc["the lease alone"], table.loc["fenced completion"]
    keyed = table.loc["fenced completion + idempotency key"]
    efficiency = Proof(
        "clocks:efficiency-vs-correctness",
        CLOCKS_TAGS["clocks:efficiency-vs-correctness"] + ".",
        f"Workers that stall, a {zombies.policy.lease_ttl:g} s TTL, the lease alone ({jobs} jobs): "
        f"{count(int(alone['jobs run twice']), 'job')} ran twice, wasted work for a report; for a "
        f"payment, {count(int(alone['ledger rows twice']), 'ledger row')} and "
        f"{count(int(alone['charges twice']), 'charge')} twice.",
        "12",
        alone["jobs run twice"] > 0 and alone["ledger rows twice"] > 0,
    )
    token = Proof(
        "clocks:fencing-token",
        CLOCKS_TAGS["clocks:fencing-token"] + ".",
        "Completion fenced by owner and attempt: "
        f"{count(int(fenced['completions refused']), 'zombie completion')} refused, "
        f"{count(int(fenced['ledger rows twice']), 'ledger row')} twice, but "
        f"{count(int(fenced['charges twice']), 'charge')} twice; with the event id as idempotency "
        f"key, {count(int(keyed['charges twice']), 'charge')} twice.",
        "12",
        fenced["ledger rows twice"] == 0
        and fenced["charges twice"] > 0
        and keyed["charges twice"] == 0,
    )
    sizes = fencing.lock_delay_sizes(True, seed)
    delays = fencing.lock_delay_experiment(
        lock_delays,
        jobs=sizes["jobs"],
        seeds=sizes["seeds"][:lock_delay_seeds],
        crash_seeds=(seed,),
    )
    none, longest = delays.iloc[0], delays.iloc[-1]
    delay = Proof(
        "clocks:sequencer-and-lock-delay",
        CLOCKS_TAGS["clocks:sequencer-and-lock-delay"] + ".",
        f"At an unfenced store, no key ({count(lock_delay_seeds, 'run')} of {sizes['jobs']} "
        f"jobs): {count(int(none.ledger_rows_twice), 'ledger row')} twice without a lock-delay, "
        f"{int(longest.ledger_rows_twice)} with {longest.lock_delay:g} s "
        f"({fencing.lock_delay_conclusion(delays)}); a crashed owner's job came back after "
        f"{none.recovery_mean:.3g} s, then {longest.recovery_mean:.3g} s.",
        "12",
        fencing.lock_delay_conclusion(delays) == "fewer, not none"
        and longest.recovery_mean > none.recovery_mean,
    )
    drift, skewed_ttl = 200.0, clocks.skewed_queue().policy.lease_ttl
    margins = clocks.worst_case_margins(ttl=skewed_ttl, round_trip=0.04, drift_ppm=drift)
    worst = margins["worst margin (ms)"]
    client = Proof(
        "clocks:conservative-client-lease",
        CLOCKS_TAGS["clocks:conservative-client-lease"] + ".",
        f"Arithmetic, not a measurement: a {skewed_ttl:g} s lease, a 40 ms round trip, a clock "
        f"{drift:g} ppm slow: counting the full TTL from the reply, the worker may act "
        f"{-worst.iloc[0]:.3g} ms past the database's deadline; counting TTL x (1 - drift) from "
        f"the send, {worst.iloc[-1]:.3g} ms at worst.",
        "12",
        bool(worst.iloc[0] < 0 and worst.iloc[-1] >= 0),
    )
    skewed = clocks.skew_experiment(skews, jobs=skew_jobs, seeds=(seed,)).set_index(
        ["clock_skew", "clock"]
    )
    spread = float(max(skews))
    worker, db = skewed.loc[(spread, "worker")], skewed.loc[(spread, "db")]
    step_seeds = (seed, seed + 1)
    step = clocks.db_step_experiment(DB_STEP, jobs=skew_jobs, seeds=step_seeds).iloc[-1]
    one = Proof(
        "clocks:one-clock",
        CLOCKS_TAGS["clocks:one-clock"] + ".",
        f"Worker clocks off by a standard deviation of {spread:g} s: "
        f"{count(int(worker['double_claims']), 'lease')} taken early (before its owner's own "
        f"clock said it ended), {count(int(worker['duplicate_external_effects']), 'charge')} "
        "twice; the same runs on the database's clock: "
        f"{count(int(db['double_claims']), 'lease')} taken early; but "
        f"{count(int(step['steps']), 'step')} of that clock by {step['db_clock_step']:+g} s in "
        f"each of {count(len(step_seeds), 'run')}: {count(int(step['double_claims']), 'lease')} "
        "taken from "
        "live owners.",
        "12",
        worker["double_claims"] > 0 and db["double_claims"] == 0 and step["double_claims"] > 0,
    )
    return [efficiency, token, delay, client, one]


# ---- the rules of thumb --------------------------------------------------------------------------


def watcher_rule(frame: pd.DataFrame) -> Proof:
    """From rules_of_thumb.repeat_recovery(): multiples of h lengthen the repeat recovery beyond
    their confidence interval; other intervals do not (on average)."""
    multiples, others = frame[frame["multiple"]], frame[~frame["multiple"]]
    h = float(frame["heartbeat_interval"].iloc[0])
    worst = multiples.loc[multiples["excess"].idxmax()] if len(multiples) else None
    holds = (
        worst is not None
        and len(others) > 0
        and bool((multiples["ci_low"] > multiples["theory"]).all())
        and multiples["excess"].mean() > others["excess"].mean()
    )
    if worst is None or not len(others):
        measured = (
            "The intervals tried need both multiples of the heartbeat interval and other intervals."
        )
    else:
        formula = (
            "below the 95% interval at every multiple"
            if (multiples["ci_low"] > multiples["theory"]).all()
            else "inside some of their 95% intervals"
        )
        measured = (
            f"Heartbeat every {h:g} s: at W = "
            + ", ".join(f"{w:g}" for w in multiples["watcher_interval"])
            + f" s a repeat recovery took on average {multiples['excess'].mean():.2g} s longer "
            f"than the formula (up to {worst['excess']:.2g} s at W = "
            f"{worst['watcher_interval']:g} s; the formula is {formula}); at the other intervals "
            f"tried, {others['excess'].mean():.2g} s on average."
        )
    return Proof(
        "rule:watcher-not-a-multiple-of-heartbeat",
        CHEAT_SHEET_TAGS["rule:watcher-not-a-multiple-of-heartbeat"] + ".",
        measured,
        "11",
        holds,
    )


def load_rule(frame: pd.DataFrame) -> Proof:
    """From rules_of_thumb.load_recovery(): the closed form holds at the lightest load and misses
    above it (mean or 95th percentile outside the simulated interval)."""
    light, busy = frame.iloc[0], frame.iloc[-1]
    busy_p95_out = not (busy["p95_ci_low"] <= busy["closed_form_p95"] <= busy["p95_ci_high"])
    # both halves of the rule: the mean above light load, and the percentile
    holds = bool(light["mean_inside"]) and not bool(busy["mean_inside"]) and busy_p95_out
    measured = (
        f"At {100 * light['utilization']:.0f}% load the simulated mean recovery, "
        f"{light['mean']:.3g} s ({light['mean_ci_low']:.3g} to {light['mean_ci_high']:.3g}), "
        f"contains the closed form's {light['closed_form_mean']:.3g} s"
        if light["mean_inside"]
        else f"At {100 * light['utilization']:.0f}% load the simulated mean recovery, "
        f"{light['mean']:.3g} s, misses the closed form's {light['closed_form_mean']:.3g} s "
        "already"
    )
    mean_where = (
        "inside"
        if busy["mean_inside"]
        else ("below" if busy["closed_form_mean"] < busy["mean_ci_low"] else "above")
    )
    p95_where = (
        "inside"
        if not busy_p95_out
        else ("below" if busy["closed_form_p95"] < busy["p95_ci_low"] else "above")
    )
    measured += (
        f"; at {100 * busy['utilization']:.0f}% it is {busy['mean']:.3g} s "
        f"({busy['mean_ci_low']:.3g} to {busy['mean_ci_high']:.3g}, the closed form {mean_where}) "
        f"and the 95th percentile {busy['p95']:.3g} s ({busy['p95_ci_low']:.3g} to "
        f"{busy['p95_ci_high']:.3g}) against the light-load {busy['closed_form_p95']:.3g} s "
        f"({p95_where}): on a busy queue the requeued job also waits for a free worker."
    )
    unshown = [
        half
        for half, shown in (("mean", not busy["mean_inside"]), ("percentile", busy_p95_out))
        if not shown
    ]
    if unshown:
        measured += (
            f" The {' and '.join(unshown)} half of the rule is not shown by these runs: the "
            "interval holds the closed form."
        )
    return Proof(
        "rule:simulate-percentiles-and-load",
        CHEAT_SHEET_TAGS["rule:simulate-percentiles-and-load"] + ".",
        measured,
        "11",
        holds,
    )


def rules(
    seed: int = 1,
    *,
    watcher_intervals=(9.0, 10.0, 11.0, 15.0, 20.0),
    replications: int = 12,
    utilizations=(0.1, 0.8),
    load_replications: int = 4,
    load_jobs: int = 150,
):
    """(repeat-recovery frame, load frame, [watcher rule, load rule])."""
    repeat = repeat_recovery(watcher_intervals, replications=replications, seed=seed)
    load = load_recovery(utilizations, replications=load_replications, jobs=load_jobs, seed=seed)
    return repeat, load, [watcher_rule(repeat), load_rule(load)]


def support_sentence(proofs: list[Proof]) -> str:
    """How many statements of the sheet this run's numbers support, naming those they do not."""
    held = [p for p in proofs if p.holds]
    text = f"In this run {len(held)} of {count(len(proofs), 'statement')} are supported by their "
    text += "numbers"
    if len(held) == len(proofs):
        return text + "."
    return (
        text
        + ": not "
        + ", ".join(f"`{p.tag}`" for p in proofs if not p.holds)
        + ". Small runs and other seeds can miss an effect; the lesson linked beside it measures "
        "it at length."
    )
