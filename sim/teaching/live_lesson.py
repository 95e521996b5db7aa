"""What notebook 10 (live mode) computes: the two effects the closed form hides, in a sentence
that follows the run's numbers; the --sql comparison's count rows (double claims first) and its
double-claims row in words, beside Lease Lab's own statements; and its exercise, whose settings
(drawn from the seed) decide which part of a recovery is the largest.

sim.teaching re-exports the checker, as it does every notebook's.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from sim.comparisons import two_sample
from sim.comparisons.live_vs_simulated import (
    COUNTS,
    DIFFER,
    PARTS,
    compare,
    figure_text,
    own_statements,
    recovery_parts,
)
from sim.scenario.settings import Scenario
from sim.support.in_words import count
from sim.teaching.answers import Verdict, typed_name, unanswered
from sim.theory import closed_forms


def effects(run, comparison) -> pd.DataFrame:
    """Observed (live and simulated) against two predictions, for the parts the closed form gets
    wrong: the time since the last renewal at a crash (h'/2 for long jobs; less for short ones) and
    the wait for a poller (P'/(k + 1) for idle pollers; the busy workers' remaining work when all
    are busy)."""
    s = run.scenario
    p, lat = s.policy, s.workload.statement_latency.mean_value()
    jobs = s.workload.processing
    busy = p.workers - 1
    parts = comparison.parts
    rows = {
        "time since the last renewal (s)": {
            "live": p.lease_ttl - parts.loc["lease_remaining", "live"],
            "simulated": p.lease_ttl - parts.loc["lease_remaining", "simulated"],
            "closed form (long jobs)": (p.heartbeat_interval + lat) / 2,
            "corrected (this job length)": closed_forms.time_since_renewal_mean(
                jobs, heartbeat_interval=p.heartbeat_interval, latency=lat
            ),
        },
        "wait for a poller (s)": {
            "live": parts.loc["poll_wait", "live"] + parts.loc["watcher_wait", "live"],
            "simulated": parts.loc["poll_wait", "simulated"]
            + parts.loc["watcher_wait", "simulated"],
            "closed form (long jobs)": closed_forms.poll_wait_mean(
                poll_interval=p.poll_interval, idle_pollers=1, latency=lat
            ),
            "corrected (this job length)": closed_forms.poll_wait_mean(
                poll_interval=p.poll_interval,
                idle_pollers=0,
                busy_workers=busy,
                job_duration=jobs,
                latency=lat,
            ),
        },
    }
    return pd.DataFrame.from_dict(rows, orient="index")


def effects_sentence(effects: pd.DataFrame, busy_workers: int) -> str:
    """effects() in words: each observation beside both predictions, and which side of the closed
    form it fell on in this run (a live run's heartbeats can come late, so its renewal can be older
    than half a heartbeat even where short jobs predict a more recent one)."""
    renewal = effects.loc["time since the last renewal (s)"]
    wait = effects.loc["wait for a poller (s)"]

    def side(x: float, closed: float, words: tuple[str, str, str]) -> str:
        """words = (below, equal as printed, above)."""
        if round(x, 3) == round(closed, 3):
            return words[1]
        return words[0] if x < closed else words[2]

    closed_r, closed_w = renewal["closed form (long jobs)"], wait["closed form (long jobs)"]
    age, length = ("more recent", "as old", "older"), ("shorter", "as long", "longer")
    return (
        f"Time since the last renewal: {renewal['simulated']:.3f} s simulated and "
        f"{renewal['live']:.3f} s live, against {closed_r:.3f} s for long jobs and "
        f"{renewal['corrected (this job length)']:.3f} s predicted for these jobs; beside the "
        "long-job closed form, the simulated renewal was "
        f"{side(renewal['simulated'], closed_r, age)} and the live one "
        f"{side(renewal['live'], closed_r, age)}. Wait for a poller: {wait['simulated']:.3f} s "
        f"simulated and {wait['live']:.3f} s live, against {closed_w:.3f} s for one idle poller "
        f"and {wait['corrected (this job length)']:.3f} s for {busy_workers} busy workers "
        "(`sim.theory.closed_forms.poll_wait_mean`); beside the idle-poller closed form, the "
        "simulated wait "
        f"was {side(wait['simulated'], closed_w, length)} and the live one "
        f"{side(wait['live'], closed_w, length)}."
    )


DOUBLE_CLAIMS = "double claims per run"
COUNT_COLUMNS = {
    "live": "live",
    "simulated": "simulated (mean per run)",
    "sim_low": "simulated low",
    "sim_high": "simulated high",
    "estimate": "live / simulated",
    "low": "ratio low",
    "high": "ratio high",
    "verdict": "verdict",
}


def count_rows(comparison) -> pd.DataFrame:
    """The comparison's per-run counts (double claims first): the live count, the simulated mean
    with its interval, their ratio with its interval (sim.compare's), and the row's verdict."""
    table = comparison.table.loc[list(COUNTS), list(COUNT_COLUMNS)]
    return table.rename(columns=COUNT_COLUMNS)


def with_own_statements(run, seeds: int):
    """The live run against `seeds` simulated runs of its scenario with Lease Lab's own statements
    on the memory backend: what a comparison that ignores the queue's SQL would have judged."""
    return compare(run, own_statements(run.scenario, seeds))


def sql_sentence(queue_sim, own_sim) -> str:
    """The double-claims row in words: the live count beside the queue's SQL simulated and beside
    Lease Lab's own statements, each ratio with its interval and the verdict that interval gives."""
    live = queue_sim.table.loc[DOUBLE_CLAIMS, "live"]

    def beside(comparison, what: str) -> str:
        row = comparison.table.loc[DOUBLE_CLAIMS]
        holds = "leaves out" if two_sample.excludes(row.low, row.high, 1.0) else "holds"
        spread = f"[{figure_text(row.sim_low)}, {figure_text(row.sim_high)}]"
        ratio = f"[{figure_text(row.low)}, {figure_text(row.high)}]"
        return (
            f"{what}, {figure_text(row.simulated)} per run over {comparison.seeds} seeds "
            f"({comparison.confidence:.0%} interval {spread}): live / simulated "
            f"{figure_text(row.estimate)}, its {comparison.row_confidence:.2%} interval {ratio} "
            f"{holds} 1, so the row says {row.verdict}"
        )

    same = beside(queue_sim, "Simulated with the same SQL on PostgreSQL")
    own = beside(own_sim, "Simulated with Lease Lab's own statements instead")
    sentence = f"Live, the queue's SQL made {count(live, 'double claim')}. {same}. {own}"
    differs = own_sim.table.loc[DOUBLE_CLAIMS, "verdict"] == DIFFER
    sentence += (
        ": the simulation of another queue is told apart from this one."
        if differs
        else ": this run did not tell the two apart on double claims."
    )
    if not queue_sim.sound:
        sentence += (
            " But the live run is UNSOUND (" + "; ".join(queue_sim.warnings) + "), so its rows "
            "judge nothing."
        )
    return sentence


# The exercise's settings, on top of the live scenario (sim.live_mode.settings.hand_check): under
# each, another part of a recovery is the largest. exercise(seed) picks one.
EXERCISE_SETTINGS: tuple[dict[str, object], ...] = (
    {},  # TTL 2 s, heartbeat 0.5 s, the claim takes expired leases, 4 busy workers polling 0.2 s
    {"policy.claim_takes_expired": False, "policy.watcher_interval": 8.0},
    {
        "policy.workers": 2,
        "policy.poll_interval": 8.0,
        "workload.arrival": "poisson",
        "workload.rate": 0.2,
    },
)


def exercise(seed: int = 1) -> Scenario:
    """10's exercise: the live scenario with one of EXERCISE_SETTINGS, drawn from `seed`."""
    from sim.live_mode.settings import hand_check

    pick = int(np.random.default_rng(seed).integers(len(EXERCISE_SETTINGS)))
    return hand_check(**EXERCISE_SETTINGS[pick], horizon=600.0, name="live-exercise")


def describe(scenario: Scenario) -> str:
    """The settings a reader needs to predict the parts of a recovery, in a sentence."""
    p, w = scenario.policy, scenario.workload
    load = (
        "a batch of jobs that keeps every worker busy"
        if w.arrival == "batch"
        else f"jobs arriving at {w.rate:g} per second (exponential, mean "
        f"{w.processing.mean_value():g} s), so workers are mostly idle"
    )
    claim = (
        "the claim takes expired leases"
        if p.claim_takes_expired
        else f"only the watcher, every {p.watcher_interval:g} s, makes an expired job claimable"
    )
    return (
        f"{p.workers} workers polling every {p.poll_interval:g} s, {load}; TTL {p.lease_ttl:g} s, "
        f"heartbeat every {p.heartbeat_interval:g} s; {claim}."
    )


def recovery_part_means(scenario: Scenario, seeds=(1, 2, 3)) -> pd.Series:
    """The mean of each part of a recovery over simulated runs of `scenario` (one per seed)."""
    from sim import runner

    parts = pd.concat([recovery_parts(runner.run(scenario, seed=s)) for s in seeds])
    return parts[list(PARTS)].mean()


_WHY = {
    "lease_remaining": " A crashed owner's lease stays valid until it runs out, so the TTL, not "
    "the watcher or the pollers, sets the recovery time.",
    "watcher_wait": " The claim does not take expired leases, so the job waits for the next "
    "watcher scan after its lease runs out: half a watcher interval on average.",
    "poll_wait": " Once the job is claimable, an idle worker still has to poll for it: with few "
    "idle pollers and a long poll interval that wait is the longest.",
}


def check_largest_part(answer, scenario: Scenario, *, seeds=(1, 2, 3)) -> Verdict:
    """10: which part of a recovery is the largest under `scenario` (exercise(seed)):
    lease_remaining, watcher_wait or poll_wait? Judged on simulated runs of it."""
    if answer is None:
        return unanswered(
            "the lease has about L - h/2 left at a crash; the watcher adds W/2 when the claim does "
            "not take expired leases; an idle poller comes P/(k+1) later."
        )
    chosen = typed_name(answer) if isinstance(answer, str) else None
    if chosen not in PARTS:
        return Verdict(
            False, f"Answer with one of {', '.join(map(repr, PARTS))}; {answer!r} is not a part."
        )
    answer = chosen
    means = recovery_part_means(scenario, seeds)
    largest = str(means.idxmax())
    runs = f"over simulated runs of seeds {', '.join(map(str, seeds))}"
    if answer != largest:
        return Verdict(
            False,
            f"{answer} is {means[answer]:.3f} s on average {runs}, but {largest} is "
            f"{means[largest]:.3f} s.",
        )
    return Verdict(
        True,
        f"{largest}: {means[largest]:.3f} s of the {means.sum():.3f} s mean {runs}.{_WHY[largest]}",
    )
