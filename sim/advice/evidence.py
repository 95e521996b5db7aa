"""The advice's evidence: its named settings one TTL step apart (A, and B and C either side:
sim.advice.shortlist) simulated (sim.sweep) at the advice's load, each with its own heartbeat and
watcher, predictions beside the simulated figures, and what they say in words: whether the
evidence agrees with the prediction, whether it confirms the target, and, when the simulated
recovery interval excludes the closed form, the simulated figure as the answer (a finding).

Crashes are made frequent enough to measure recovery (about EVIDENCE_CRASHES a run), but never so
frequent that they take more than a share of the pool's headroom (sim.theory.pool counts the
restarts and the redone work); the predictions in the table are made at the crash rate simulated, so
that the two columns compare like with like. Recovery intervals pool every crash of every run
(sim.theory.stats.pooled_mean_ci), so two runs give an interval; with too few crashes there is none.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pandas as pd

from sim.advice.candidates import pool_of
from sim.support.in_words import apart, claim, count, duration, percent

EVIDENCE_CRASHES = 40  # wanted per run, to measure recovery
STEADY_MEAN_JOBS = 10  # the arrivals of a run last at least this many mean jobs (not a warm-up)
HEADROOM_SHARE = 0.5  # the evidence's crashes take at most this share of the pool's idle capacity
CRASH_LOAD_GROWTH = 0.05  # ... and add at most 5 points to its utilisation
METRICS = [
    "jobs",
    "leases",
    "false_expiries",
    "recoveries",
    "recovery_latency_mean",
    "recovery_latency_sd",
    "db_heartbeat_per_s",
    "db_requeue_expired_per_s",
]


def evidence_jobs(advice, jobs: int) -> int:
    """Jobs a run needs: `jobs`, or more when the arrival rate would end the arrivals within
    STEADY_MEAN_JOBS mean jobs (a big pool would be measured while it fills)."""
    rate = advice.inputs["jobs_per_s"]
    return max(int(jobs), math.ceil(rate * STEADY_MEAN_JOBS * advice.durations.mean_value()))


def evidence_crash_rate(advice, worker_hours: float) -> float:
    """Crashes per worker-hour simulated: about EVIDENCE_CRASHES a run, at least the assumed rate,
    and at most what adds min(5 points, half the headroom) to the advice's utilisation."""
    a = advice.assumptions
    rate = advice.inputs["jobs_per_s"]
    pool = pool_of(advice.durations, advice.inputs["workers"], a)
    u = pool.utilisation(rate)
    most = u + min(CRASH_LOAD_GROWTH, HEADROOM_SHARE * (1 - u))
    keep = u / most  # per_worker(c) / per_worker(user's c) must stay above this
    low, high = a.crash_rate, max(a.crash_rate, EVIDENCE_CRASHES / worker_hours)
    if _per_worker(pool, high) >= keep * pool.per_worker:
        return _three_digits(high)
    for _ in range(50):  # bisection: per_worker falls as the crash rate grows
        middle = (low + high) / 2
        if _per_worker(pool, middle) >= keep * pool.per_worker:
            low = middle
        else:
            high = middle
    return max(a.crash_rate, _three_digits(low))


def _three_digits(x: float) -> float:
    """x rounded down to 3 significant digits (a rate that prints as it is)."""
    if x <= 0:
        return x
    scale = 10 ** (math.floor(math.log10(x)) - 2)
    return float(f"{math.floor(x / scale) * scale:.3g}")


def _per_worker(pool, crash_rate: float) -> float:
    return dataclasses.replace(pool, crash_rate=crash_rate).per_worker


def simulate(
    advice, ttls: list[float], replications: int, jobs: int, seed: int, executor, progress
) -> pd.DataFrame:
    """Simulate the named settings one TTL step apart (A, and those one step shorter and longer;
    `ttls`: the TTLs allowed, at or above any floor), each with its own heartbeat and watcher;
    simulated figures beside predictions made at the crash rate simulated."""
    from sim.scenario.settings import to_dict
    from sim.sweeps import sweep
    from sim.theory.stats import pooled_mean_ci, wilson_interval

    named = advice.shortlist[
        advice.shortlist["step"].notna() & advice.shortlist["ttl"].isin(ttls)
    ].sort_values("ttl")
    # one 99.9th percentile after the last arrival: enough for the leases to end, not an idle pool
    base = advice.scenario(jobs=evidence_jobs(advice, jobs), name="advice-evidence", tail=1.0)
    worker_hours = base.policy.workers * base.horizon / 3600
    crash_rate = evidence_crash_rate(advice, worker_hours)
    base = base.replace(faults=dataclasses.replace(base.faults, crash_rate=crash_rate))
    policies = [
        to_dict(advice.scenario(jobs=1, setting=name, tail=1.0).replace(faults=base.faults))[
            "policy"
        ]
        for name in named["name"]
    ]
    result = sweep(
        base,
        {"policy": policies},
        replications,
        seed=seed,
        executor=executor,
        progress=progress,
        metrics=METRICS,
    )
    assumed = dataclasses.replace(advice.assumptions, crash_rate=crash_rate)
    model = advice.model.moved(arrival_rate=base.workload.rate, assumptions=assumed)
    utilisation = model.pool.utilisation(base.workload.rate)
    rows = []
    for k, row in enumerate(named.itertuples()):
        runs = result.runs.iloc[k * replications : (k + 1) * replications]
        h = None if pd.isna(row.heartbeat_interval) else float(row.heartbeat_interval)
        predicted = model.table([row.ttl], [h], [row.watcher_interval]).iloc[0]
        leases, fe = int(runs["leases"].sum()), int(runs["false_expiries"].sum())
        low, high = wilson_interval(fe, leases, 0.95)
        mean, r_low, r_high, recoveries = pooled_mean_ci(
            runs["recoveries"], runs["recovery_latency_mean"], runs["recovery_latency_sd"]
        )
        upkeep = runs["db_heartbeat_per_s"] + runs["db_requeue_expired_per_s"]
        rows.append(
            {
                "name": row.name,
                "ttl": float(row.ttl),
                "heartbeat_interval": np.nan if h is None else h,
                "watcher_interval": float(row.watcher_interval),
                "recommended": row.name == "A",
                "runs": len(runs),
                "jobs": int(runs["jobs"].sum()),
                "crash_rate": crash_rate,
                "utilisation": utilisation,
                "leases": leases,
                "false_expiries": fe,
                "false_expiry": fe / leases if leases else np.nan,
                "false_expiry_ci_low": low,
                "false_expiry_ci_high": high,
                "predicted_false_expiry": float(predicted["predicted_false_expiry"]),
                "recoveries": recoveries,
                "recovery_mean": mean,
                "recovery_ci_low": r_low,
                "recovery_ci_high": r_high,
                "predicted_recovery_mean": float(predicted["predicted_recovery_mean"]),
                "db_load": float(upkeep.mean()),
                "predicted_db_load": float(predicted["db_load"]),
            }
        )
    return pd.DataFrame(rows)


# ---- what the evidence says ----------------------------------------------------------------------


def recommended_row(advice):
    """The evidence row of the recommended TTL, or None without evidence."""
    evidence = advice.evidence
    if evidence is None or not len(evidence) or not evidence["recommended"].any():
        return None
    return evidence[evidence["recommended"]].iloc[0]


def _contains(low, high, value) -> bool | None:
    """Whether [low, high] contains value; None when there is no interval."""
    if not (np.isfinite(low) and np.isfinite(high)):
        return None
    return bool(low <= value <= high)


def recovery_answer(advice) -> tuple[float, str]:
    """(the recovery the advice gives, "predicted" or "simulated"): the simulated figure when the
    simulated interval excludes the closed form, moved to the advice's crash rate by the closed
    form's difference between the two crash rates (0 when they are the same)."""
    row = recommended_row(advice)
    if row is None or _contains(
        row.recovery_ci_low, row.recovery_ci_high, row.predicted_recovery_mean
    ) in (None, True):
        return advice.predicted_recovery_mean, "predicted"
    shift = advice.predicted_recovery_mean - row.predicted_recovery_mean
    return float(row.recovery_mean + shift), "simulated"


def verdict(advice) -> str | None:
    """One line: does the evidence at A (the recommendation) agree with the prediction?"""
    row = recommended_row(advice)
    if row is None:
        return None
    fe = _contains(row.false_expiry_ci_low, row.false_expiry_ci_high, row.predicted_false_expiry)
    rec = _contains(row.recovery_ci_low, row.recovery_ci_high, row.predicted_recovery_mean)
    fe_text = (
        f"the simulated false expiry [{percent(row.false_expiry_ci_low)}, "
        f"{percent(row.false_expiry_ci_high)}] {'contains' if fe else 'excludes'} the predicted "
        f"{percent(row.predicted_false_expiry)}"
    )
    rate = (
        ""
        if math.isclose(row.crash_rate, advice.assumptions.crash_rate)
        else f" at the {count(row.crash_rate, 'crash', 'crashes')} per worker-hour simulated"
    )
    rec_text = (
        f"there were too few crashes ({row.recoveries}) for a recovery interval"
        if rec is None
        else f"the simulated recovery [{duration(row.recovery_ci_low)}, "
        f"{duration(row.recovery_ci_high)}] {'contains' if rec else 'excludes'} the predicted "
        f"{duration(row.predicted_recovery_mean)}{rate}"
    )
    disagree = [name for name, ok in (("false expiry", fe), ("recovery", rec)) if ok is False]
    head = (
        f"evidence disagrees with the prediction on {' and '.join(disagree)}"
        if disagree
        else "evidence agrees with the prediction"
    )
    return f"{head}: at A {fe_text}, and {rec_text}"


def target_line(advice) -> str | None:
    """Whether the simulation confirms the target at A, with its numbers."""
    row = recommended_row(advice)
    if row is None:
        return None
    target = advice.target_false_expiry
    low, high = row.false_expiry_ci_low, row.false_expiry_ci_high
    if high <= target:
        shown, named = apart(high, target)[0], target_words(advice, apart(high, target)[1])
        return claim(
            high <= target,
            f"target confirmed: the simulated false expiry's 95% upper bound, {shown}, is "
            f"within the {named} ({count(row.leases, 'lease')})",
        )
    if low > target:
        shown, named = apart(low, target)[0], target_words(advice, apart(low, target)[1])
        return claim(
            low > target,
            f"target missed in simulation: the simulated false expiry's 95% interval "
            f"[{shown}, {percent(high)}] lies above the {named}",
        )
    named = target_words(advice, apart(high, target)[1])
    need = leases_to_confirm(row.predicted_false_expiry, target)
    more = (
        "no number of runs can confirm it, since the prediction itself is not below the target"
        if need is None
        else f"at the predicted {percent(row.predicted_false_expiry)} about {need:,} leases would "
        f"confirm it, {count(math.ceil(need / max(1.0, row.leases / row.runs)), 'run')} like "
        "these (replications)"
    )
    return claim(
        low <= target < high,
        f"target unconfirmed: the simulated false expiry's 95% interval [{percent(low)}, "
        f"{apart(high, target)[0]}] reaches above the {named} ({count(row.leases, 'lease')}); "
        f"{more}",
    )


def target_words(advice, shown: str | None = None) -> str:
    """'0.1% target' or '10-a-day target (0.012% per job)' (`shown`: the per-job target as the
    sentence writes it)."""
    shown = shown or percent(advice.target_false_expiry)
    if advice.target_per_day is None:
        return f"{shown} target"
    return f"{advice.target_per_day:g}-a-day target ({shown} per job)"


def leases_to_confirm(rate: float, target: float, confidence: float = 0.95) -> int | None:
    """The fewest leases whose Wilson upper bound is within `target` when the share seen is `rate`
    (None when rate >= target: no number confirms it)."""
    if not rate < target:
        return None
    from sim.theory.stats import wilson_interval

    def confirms(n: int) -> bool:
        return wilson_interval(rate * n, n, confidence)[1] <= target

    high = 16
    while not confirms(high):
        high *= 2
    low = high // 2
    while high - low > 1:
        middle = (low + high) // 2
        if confirms(middle):
            high = middle
        else:
            low = middle
    return high


def findings(advice) -> list[str]:
    """Where the simulation and the closed form part: the recovery figure the advice then gives."""
    row = recommended_row(advice)
    value, source = recovery_answer(advice)
    if row is None or source == "predicted":
        return []
    same = math.isclose(row.crash_rate, advice.assumptions.crash_rate)
    moved = (
        ""
        if same
        else f", moved to your {count(advice.assumptions.crash_rate, 'crash', 'crashes')} per "
        f"worker-hour by the closed form's difference ({value - row.recovery_mean:+.3g} s)"
    )
    low = row.predicted_recovery_mean < row.recovery_ci_low
    why = (
        "it takes the busy workers' remaining work as independent, while long jobs tend to keep "
        "them busy together, so under load it runs low"
        if low
        else "it runs high here"
    )
    return [
        f"finding: at A the closed form's recovery, "
        f"{duration(row.predicted_recovery_mean)}, is {'below' if low else 'above'} the simulated "
        f"95% interval [{duration(row.recovery_ci_low)}, {duration(row.recovery_ci_high)}] (mean "
        f"{duration(row.recovery_mean)} over {count(row.recoveries, 'crash', 'crashes')} at "
        f"{count(row.crash_rate, 'crash', 'crashes')} per worker-hour); the advice gives the "
        f"simulated figure, {duration(value)}{moved}. The closed form: {why}"
    ]
