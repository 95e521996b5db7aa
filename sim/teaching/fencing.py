"""Notebook 12, first half: what a failed lease costs, who can check a fencing token, and Chubby's
lock-delay, each measured on a queue whose workers stall now and then.

A lease fails when a pause outlasts it: the worker wakes as a zombie and finishes a job another
worker now holds. For work that is only wasteful twice (a report) that is the whole cost, a lock
for efficiency; for a payment it corrupts the ledger and charges twice, a lock for correctness,
which needs every store the job writes to check a fencing token (Kleppmann; DDIA chapter 8).
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pandas as pd

from sim.scenario.settings import Scenario
from sim.support.in_words import count
from sim.teaching.answers import Verdict, as_set, unanswered
from sim.teaching.lessons import stalling_queue
from sim.theory.stats import mean_ci

# The protections compared (policy overrides): the lease alone; completion fenced by owner and
# attempt (the token the database checks); fenced, plus the event id as the PSP's idempotency key.
PROTECTIONS: dict[str, dict[str, object]] = {
    "the lease alone": {"policy.fencing": False, "policy.idempotency_key": False},
    "fenced completion": {"policy.fencing": True, "policy.idempotency_key": False},
    "fenced completion + idempotency key": {
        "policy.fencing": True,
        "policy.idempotency_key": True,
    },
}


def zombie_queue(*, jobs: int = 600, seed: int = 1) -> Scenario:
    """03's stalling queue, pausing four times as often (240 pauses per worker-hour, median 1 s,
    p99 10 s), with a 5 s TTL, a heartbeat every 2 s and retries: a pause longer than about 3 s
    lapses the lease, another worker takes the job, and the paused worker wakes as a zombie that
    finishes anyway (abandon_on_lost_lease off). No dedup marker, so the ledger shows every
    completion that committed."""
    return stalling_queue(jobs=jobs, seed=seed, pause_rate=240.0).with_overrides(
        {
            "name": "zombie-queue",
            "policy.lease_ttl": 5.0,
            "policy.max_attempts": 25,
            "policy.claim_takes_expired": True,
            "policy.abandon_on_lost_lease": False,
            "policy.dedup": False,
            "expect": [],
        }
    )


def ran_twice(run) -> int:
    """Jobs whose PSP call was made under two or more leases (a charge, or a replay of one): the
    work was done twice, whatever the stores made of it."""
    charges = run.events[run.events["kind"] == "psp_charge"]
    return int((charges.groupby("job")["attempt"].nunique() > 1).sum())


def protection_runs(scenario: Scenario, seeds: Iterable[int] = (1,)) -> dict[str, list]:
    """`scenario` under each of PROTECTIONS, one run per seed."""
    from sim import runner

    return {
        name: [runner.run(scenario.with_overrides(overrides), seed=s) for s in seeds]
        for name, overrides in PROTECTIONS.items()
    }


def protection_table(runs: dict[str, list]) -> pd.DataFrame:
    """Per protection, summed over its runs: leases, false expiries, jobs run twice, completions
    refused by fencing, ledger rows and PSP charges applied twice."""
    rows = {}
    for name, group in runs.items():
        rows[name] = {
            "leases": sum(int(r.summary["leases"]) for r in group),
            "false expiries": sum(int(r.summary["false_expiries"]) for r in group),
            "jobs run twice": sum(ran_twice(r) for r in group),
            "completions refused": sum(
                int((r.events["kind"] == "complete_rejected").sum()) for r in group
            ),
            "ledger rows twice": sum(int(r.summary["duplicate_db_effects"]) for r in group),
            "charges twice": sum(int(r.summary["duplicate_external_effects"]) for r in group),
        }
    return pd.DataFrame.from_dict(rows, orient="index")


def refused_token(run) -> dict | None:
    """The first completion fencing refused: who tried, with which attempt (its token), and the
    attempt the row held at that moment (the last claim of the job before it). None if none."""
    events = run.events
    refused = events[events["kind"] == "complete_rejected"]
    if refused.empty:
        return None
    first = refused.iloc[0]
    claims = events[
        (events["kind"] == "claim") & (events["job"] == first.job) & (events["t"] <= first.t)
    ]
    holder = claims.iloc[-1]
    return {
        "job": int(first.job),
        "at": float(first.t),
        "zombie": str(first.worker),
        "token": int(first.attempt),
        "holder": str(holder.worker),
        "current": int(holder.attempt),
    }


# ---- Chubby's lock-delay -------------------------------------------------------------------------


def lock_delay_queue(*, jobs: int = 600, seed: int = 1) -> Scenario:
    """The zombie queue at a store that checks nothing: completion unfenced, no idempotency key,
    and expired jobs come back only through the watcher (every second), which makes each claimable
    again after policy.retry_backoff x attempts⁴ seconds: on a job's first requeue, a lock-delay
    of retry_backoff seconds."""
    return zombie_queue(jobs=jobs, seed=seed).with_overrides(
        {
            "name": "lock-delay-queue",
            "policy.fencing": False,
            "policy.idempotency_key": False,
            "policy.claim_takes_expired": False,
            "policy.watcher_interval": 1.0,
        }
    )


def first_recoveries(run) -> pd.Series:
    """Recovery latencies of crashes that ended a job's first lease (its first requeue: the
    lock-delay is retry_backoff x 1)."""
    crashes = run.events[(run.events["kind"] == "crash") & run.events["job"].notna()]
    first = crashes[crashes["attempt"] == 1]
    rec = run.recoveries.merge(
        first[["t", "job"]].rename(columns={"t": "crash_at"}), on=["crash_at", "job"]
    )
    return rec["latency"].dropna()


def late_completions(run) -> pd.DataFrame:
    """Each completion of a lease the watcher had already requeued (a zombie's): the job, how long
    after the requeue it landed (`late`), and whether another worker had claimed the job in
    between (`again`: the work was done twice) or not (the delay kept the job for the zombie)."""
    events = run.events
    requeued = events.loc[events["kind"] == "requeue", ["t", "job", "attempt"]]
    done = events.loc[events["kind"] == "complete", ["t", "job", "attempt"]]
    late = done.merge(requeued.rename(columns={"t": "requeued_at"}), on=["job", "attempt"])
    late = late[late["t"] > late["requeued_at"]].reset_index(drop=True)
    claims = events.loc[events["kind"] == "claim", ["t", "job", "attempt"]]
    late["again"] = [
        bool(((claims["job"] == j) & (claims["attempt"] > a) & (claims["t"] < t)).any())
        for j, a, t in zip(late["job"], late["attempt"], late["t"], strict=True)
    ]
    late["late"] = late["t"] - late["requeued_at"]
    return late[["job", "attempt", "requeued_at", "late", "again"]]


def lock_delay_sizes(fast: bool, seed: int = 1) -> dict:
    """lock_delay_experiment()'s settings in notebooks 12 and 11: delays up to Chubby's minute,
    on 600-job runs of 5 seeds (fast mode: 0, 20 and 60 s) or 10 (0 to 60 s), enough that both
    modes see the zombies a minute's delay still lets through (about 2 per run)."""
    delays = (0.0, 20.0, 60.0) if fast else (0.0, 5.0, 10.0, 20.0, 40.0, 60.0)
    return {"delays": delays, "jobs": 600, "seeds": tuple(range(seed, seed + (5 if fast else 10)))}


def lock_delay_experiment(
    delays: Iterable[float],
    *,
    jobs: int = 600,
    seeds: Iterable[int] = (1, 2, 3),
    crash_seeds: Iterable[int] | None = None,
) -> pd.DataFrame:
    """Per lock-delay: effects applied twice at the unfenced store (pauses only), the zombies'
    late completions (how many landed within the delay, how many after another worker had taken
    the job, the latest of those after its requeue), and the mean recovery latency of a
    first-lease crash with its 95% interval (crashes only, no pauses; on `crash_seeds`, by
    default `seeds`, none when empty: the delay adds itself to every recovery, so one seed shows
    it)."""
    from sim import runner

    seeds = tuple(seeds)
    crash_seeds = seeds if crash_seeds is None else tuple(crash_seeds)
    paused = lock_delay_queue(jobs=jobs)
    crashing = paused.with_overrides(
        {"faults.pause_rate": 0.0, "faults.crash_rate": 20.0, "faults.restart_delay": 5.0}
    )
    rows = []
    for delay in delays:
        delay = float(delay)
        backoff: dict[str, object] = {"policy.retry_backoff": delay}
        runs = [runner.run(paused.with_overrides(backoff), seed=s) for s in seeds]
        crashed = [runner.run(crashing.with_overrides(backoff), seed=s) for s in crash_seeds]
        latencies = [first_recoveries(r) for r in crashed]
        mean, low, high, n = mean_ci(pd.concat(latencies).to_numpy(float) if latencies else [])
        late = pd.concat([late_completions(r) for r in runs])
        through = late[late["again"]]
        rows.append(
            {
                "lock_delay": delay,
                "false_expiries": sum(int(r.summary["false_expiries"]) for r in runs),
                "jobs_run_twice": sum(ran_twice(r) for r in runs),
                "ledger_rows_twice": sum(int(r.summary["duplicate_db_effects"]) for r in runs),
                "charges_twice": sum(int(r.summary["duplicate_external_effects"]) for r in runs),
                "zombies_kept_out": int((~late["again"]).sum()),
                "zombies_through": len(through),
                "latest_through": float(through["late"].max()) if len(through) else np.nan,
                "recoveries": n,
                "recovery_mean": mean,
                "recovery_ci_low": low,
                "recovery_ci_high": high,
            }
        )
    return pd.DataFrame(rows)


def lock_delay_conclusion(frame: pd.DataFrame) -> str:
    """What lock_delay_experiment() concludes, as one of three words the sentence and the tests
    share: 'fewer, not none' (the longest delay tried let fewer zombies through than none, and
    still some), 'none in these runs' (the longest let none through: too few runs to see the
    tail), or 'no fewer' (the delay did not help)."""
    none, longest = frame.iloc[0], frame.iloc[-1]
    if longest.ledger_rows_twice >= none.ledger_rows_twice:
        return "no fewer"
    return "fewer, not none" if longest.ledger_rows_twice > 0 else "none in these runs"


def lock_delay_sentence(frame: pd.DataFrame) -> str:
    """What lock_delay_experiment() shows, in words that follow its numbers: a lock-delay is a
    timing assumption, which a longer pause or longer remaining work defeats."""
    none, longest = frame.iloc[0], frame.iloc[-1]
    conclusion = lock_delay_conclusion(frame)
    text = (
        f"Without a lock-delay, {count(int(none.jobs_run_twice), 'job')} ran twice at the store "
        f"that checks nothing ({count(int(none.ledger_rows_twice), 'ledger row')} and "
        f"{count(int(none.charges_twice), 'charge')} applied twice). "
    )
    kept = int(longest.zombies_kept_out)
    text += (
        f"With {longest.lock_delay:g} s, the longest delay tried, {count(kept, 'late completion')} "
        "of a zombie landed while the delay kept its job from everyone else, and "
    )
    if conclusion == "fewer, not none":
        text += (
            f"{count(int(longest.zombies_through), 'zombie')} still finished after another worker "
            f"had taken the job, the latest {longest.latest_through:.3g} s after its requeue: "
            f"{count(int(longest.ledger_rows_twice), 'ledger row')} twice. "
        )
    elif conclusion == "none in these runs":
        text += (
            "none finished after another worker had taken the job in these runs; the pauses and "
            "the jobs have no longest, so more runs would show one. "
        )
    else:
        text += (
            f"{count(int(longest.ledger_rows_twice), 'ledger row')} applied twice, no fewer than "
            "without it. "
        )
    return text + (
        "A lock-delay is a timing assumption: it makes double work rarer, and a longer pause or "
        "longer remaining work defeats it, whatever its length. Its price is paid by every crash: "
        f"a crashed owner's job came back after {none.recovery_mean:.3g} s on average without a "
        f"delay and {longest.recovery_mean:.3g} s with {longest.lock_delay:g} s."
    )


def check_refusers(answer, runs: dict[str, list]) -> Verdict:
    """12: in the runs of protection_runs(), which stores refused the zombie's second write under
    'fenced completion': a set of 'ledger' and 'psp'. Judged on the runs."""
    table = protection_table(runs)
    if answer is None:
        return unanswered("look at the 'fenced completion' row: what was applied twice?")
    fenced = table.loc["fenced completion"]
    truth = {
        store
        for store, column in (("ledger", "ledger rows twice"), ("psp", "charges twice"))
        if fenced[column] == 0
    }
    given = as_set(answer)
    if given is None:
        return Verdict(
            False,
            "Answer with a set of 'ledger' and 'psp' (e.g. {'ledger'}, or set() for neither); "
            f"{answer!r} is not one.",
        )
    chosen = {str(a).strip().lower() for a in given}
    unknown = chosen - {"ledger", "psp"}
    if unknown:
        return Verdict(
            False, f"Choose among 'ledger' and 'psp'; {', '.join(sorted(unknown))} is not one."
        )
    if chosen == truth:
        return Verdict(
            True,
            f"{', '.join(sorted(truth)) or 'neither'}: {int(fenced['ledger rows twice'])} ledger "
            f"rows and {int(fenced['charges twice'])} charges twice. The ledger row commits in the "
            "transaction of the fenced completion, so the database checks the token for it; the "
            "PSP never sees the token and charged again, until the idempotency key gave it "
            "something it can check.",
        )
    wrong = []
    if "psp" in chosen - truth:
        wrong.append(
            f"the PSP took {count(int(fenced['charges twice']), 'charge')} twice: it cannot see "
            "the attempt"
        )
    if "ledger" in truth - chosen:
        wrong.append(
            "the ledger got no second row: its insert rolled back with the refused completion"
        )
    if "ledger" in chosen - truth:
        wrong.append(f"the ledger got {count(int(fenced['ledger rows twice']), 'second row')}")
    text = "; ".join(wrong)
    return Verdict(False, text[:1].upper() + text[1:] + ".")
