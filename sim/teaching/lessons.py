"""The scenarios and experiments the lessons share: one job by hand, the recovery experiment,
a stalling queue, the advice as a trade-off frame, dedup retention, claims under contention, and
two runs compared record by record."""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np
import pandas as pd

from sim.db.base import Backend
from sim.errors import ConfigError
from sim.scenario.dists import Dist
from sim.scenario.settings import (
    LOCK_TTL,
    Faults,
    Policy,
    Scenario,
    ScriptedCrash,
    ScriptedOutage,
    Workload,
    as_scenario,
    validate,
)
from sim.teaching.by_hand import Script, deliver, ledger_counts

STRATEGIES = ("read_then_write", "conditional_update", "skip_locked", "select_for_update")


# ---- scenarios the lessons share -----------------------------------------------------------------


def one_job(
    *,
    ttl: float = 15.0,
    heartbeat_interval: float = 5.0,
    watcher_interval: float = 5.0,
    heartbeat: bool = True,
    watcher: bool = True,
    lock: bool = False,
    crash_at: float | None = None,
    pause: tuple[float, float] | None = None,
    partition: tuple[float, float] | None = None,
    work: float = 40.0,
    psp_at: float = 0.5,
    workers: int = 2,
    poll_interval: float = 1.0,
    claim_takes_expired: bool = False,
    fencing: bool = True,
    abandon_on_lost_lease: bool = True,
    idempotency_key: bool = True,
    horizon: float | None = None,
    seed: int = 1,
    name: str | None = None,
) -> Scenario:
    """One payment job of `work` seconds and `workers` workers: the smallest scene of a lesson.

    crash_at: the job's owner crashes then and never comes back. pause / partition: (at, duration)
    for worker w0, which holds the job (workers poll from t = 0 in order, so w0 claims first).
    lock=True models a lock instead of a lease: a claim that never expires (TTL LOCK_TTL), no
    heartbeat, no watcher. Statement latency is a constant 2 ms; the PSP call 0.3 s.
    """
    if lock:
        ttl, heartbeat, watcher = LOCK_TTL, False, False
    faults = Faults(
        crashes=(ScriptedCrash(at=float(crash_at), job=1),) if crash_at is not None else (),
        restart_delay=Dist.constant(1e7),
        pauses=(ScriptedOutage(worker=0, at=float(pause[0]), duration=float(pause[1])),)
        if pause
        else (),
        partitions=(ScriptedOutage(worker=0, at=float(partition[0]), duration=float(partition[1])),)
        if partition
        else (),
        partition_mode="hang",
    )
    policy = Policy(
        workers=workers,
        poll_interval=poll_interval,
        lease_ttl=float(ttl),
        heartbeat=heartbeat,
        heartbeat_interval=float(heartbeat_interval),
        watcher=watcher,
        watcher_interval=float(watcher_interval),
        claim_takes_expired=claim_takes_expired,
        fencing=fencing,
        dedup=True,
        idempotency_key=idempotency_key,
        abandon_on_lost_lease=abandon_on_lost_lease,
        random_phase=False,
    )
    workload = Workload(
        jobs=1,
        processing=Dist.constant(float(work)),
        psp_at=psp_at,
        psp_call=Dist.constant(0.3),
        statement_latency=Dist.constant(0.002),
    )
    if horizon is None:
        outage = pause or partition or (0.0, 0.0)
        horizon = max(
            work + 2 * (0 if lock else ttl) + (0 if lock else watcher_interval) + 10.0,
            (crash_at or 0.0) + 2 * work + 20.0,
            outage[0] + outage[1] + work + 20.0,
        )
    label = name or ("lock" if lock else "lease")
    return validate(
        Scenario(
            name=label,
            workload=workload,
            policy=policy,
            faults=faults,
            horizon=float(horizon),
            seed=seed,
        )
    )


def recovery_experiment(
    *,
    ttl: float = 30.0,
    heartbeat_interval: float = 10.0,
    poll_interval: float = 2.0,
    watcher_interval: float = 30.0,
    watcher: bool = True,
    crash_at: float = 1000.0,
    mean_arrival: float = 100.0,
    latency: float = 0.002,
    longest_watcher_interval: float = 300.0,
) -> Scenario:
    """The controlled recovery experiment behind notebook 04's sweep (closed form:
    sim.theory.closed_forms).

    One very long job arrives at an exponentially distributed time (mean `mean_arrival`), is claimed
    by one of two workers, renewed by heartbeat, and its owner crashes at `crash_at` for good; the
    other worker is the one idle poller. The random arrival puts the crash at a (nearly) uniform
    phase of the heartbeat cycle: see phase_bias(). With watcher=False the claim itself takes the
    expired lease (claim_takes_expired), else only the watcher's requeue makes it claimable. The
    horizon leaves room for watcher intervals up to `longest_watcher_interval`, so that a sweep over
    policy.watcher_interval recovers every crash inside the run.
    """
    return Scenario(
        name="recovery-experiment",
        description=(
            "One long job, two workers, its owner crashes for good; the other worker recovers it."
        ),
        workload=Workload(
            jobs=1,
            arrival="poisson",
            rate=1.0 / mean_arrival,
            processing=Dist.constant(1e7),
            psp_call=Dist.constant(0.0),
            statement_latency=Dist.constant(latency),
        ),
        policy=Policy(
            workers=2,
            poll_interval=poll_interval,
            lease_ttl=ttl,
            heartbeat_interval=heartbeat_interval,
            watcher=watcher,
            watcher_interval=watcher_interval,
            claim_takes_expired=not watcher,
        ),
        faults=Faults(
            crashes=(ScriptedCrash(at=crash_at, job=1),), restart_delay=Dist.constant(1e7)
        ),
        horizon=crash_at
        + ttl
        + (max(watcher_interval, longest_watcher_interval) if watcher else 0.0)
        + 2 * poll_interval
        + 10.0,
    )


def phase_bias(*, mean_arrival: float, heartbeat_interval: float, latency: float = 0.002) -> float:
    """How much recovery_experiment() shortens the mean recovery against the uniform-phase theory.

    The crash phase phi = time since the last renewal; with an exponential arrival its density is
    proportional to exp(phi / mean) on [0, h'), so E[phi] = h' / (1 - exp(-h'/mean)) - mean
    instead of h'/2, and the lease left at the crash is shorter by the difference.
    """
    cycle = heartbeat_interval + latency
    rate = 1.0 / mean_arrival
    return cycle / -math.expm1(-rate * cycle) - mean_arrival - cycle / 2


def followed_job(run, jobs: Iterable[int]) -> int:
    """Of `jobs` (ids, in order of preference), one worth following on a timeline: the first whose
    leases were held by more than one worker (the hand-over draws an arrow between two lanes),
    else the first."""
    jobs = [int(j) for j in jobs]
    if not jobs:
        raise ConfigError("followed_job: no job to follow")
    holders = run.leases.groupby("job")["worker"].nunique()
    return next((j for j in jobs if holders.get(j, 0) > 1), jobs[0])


def stalling_queue(
    *, jobs: int = 600, workers: int = 6, pause_rate: float = 60.0, seed: int = 1
) -> Scenario:
    """A payment queue whose workers stall: stop-the-world pauses (`pause_rate` per worker-hour,
    lognormal, median 1 s, p99 10 s) on jobs with a long tail (lognormal, median 4 s, p99 60 s), at
    about half load, heartbeat every 2 s when on. Each job gets one lease (max_attempts 1), so false
    expiries per lease are false expiries per job."""
    processing = Dist.lognormal(4.0, 60.0)
    rate = 0.5 * workers / processing.mean_value()
    return validate(
        Scenario(
            name="stalling-queue",
            description=(
                "Workers stall (GC pauses) now and then; how often does a lease expire "
                "under a live owner?"
            ),
            workload=Workload(
                jobs=jobs,
                arrival="poisson",
                rate=rate,
                processing=processing,
                psp_call=Dist.constant(0.0),
                statement_latency=Dist.constant(0.002),
            ),
            policy=Policy(
                workers=workers,
                poll_interval=1.0,
                lease_ttl=30.0,
                heartbeat_interval=2.0,
                watcher_interval=5.0,
                claim_takes_expired=False,
                max_attempts=1,
            ),
            faults=Faults(pause_rate=pause_rate, pause_duration=Dist.lognormal(1.0, 10.0)),
            horizon=jobs / rate + 3 * processing.quantile(0.99),
            seed=seed,
        )
    )


def retention_experiment(
    retention: float,
    *,
    window: float = 60.0,
    events: int = 200,
    spacing: float = 1.0,
    purge_every: float = 5.0,
    seed: int = 0,
    db: Backend | None = None,
) -> pd.DataFrame:
    """Each event is delivered, then delivered again after a delay drawn uniformly up to `window`
    (the redelivery window); a purge job deletes dedup markers older than `retention` every
    `purge_every` seconds. One row per event: delays, whether its marker was gone when the
    redelivery came, and its ledger rows (2 = the duplicate got through).
    """
    if retention < 0 or window <= 0 or purge_every <= 0 or events < 1:
        raise ConfigError(
            "retention_experiment: need retention >= 0, window > 0, purge_every > 0, events >= 1"
        )
    rng = np.random.default_rng(seed)
    first = np.arange(1, events + 1) * spacing
    delay = rng.uniform(0.0, window, events)
    plan = [(t, 0, i) for i, t in enumerate(first)] + [
        (t + d, 1, i) for i, (t, d) in enumerate(zip(first, delay, strict=True))
    ]
    horizon = max(t for t, _, _ in plan)
    plan += [
        (k * purge_every, -1, -1) for k in range(1, int(horizon // purge_every) + 1)
    ]  # purges go first at a tie
    plan.sort()
    script = Script(db)
    script.connect("consumer", "purger")
    for t, kind, i in plan:
        script.at(t)
        if kind < 0:
            script.sql("purger", "purge_dedup_markers", before=max(0.0, t - retention))
        else:
            deliver(script, "consumer", f"evt-{i + 1}", job_id=i + 1, attempt=kind + 1)
    counts = ledger_counts(script)
    script.close()
    frame = pd.DataFrame(
        {
            "event_id": [f"evt-{i + 1}" for i in range(events)],
            "delivered_at": first,
            "redelivered_at": first + delay,
            "delay": delay,
        }
    )
    frame["ledger_rows"] = frame["event_id"].map(counts).fillna(0).astype(int)
    frame["duplicate"] = frame["ledger_rows"] > 1
    return frame


def retention_curve(retentions: Iterable[float], **kwargs) -> pd.DataFrame:
    """retention_experiment() for each retention: share of events whose duplicate got through."""
    rows = []
    for r in retentions:
        frame = retention_experiment(float(r), **kwargs)
        rows.append(
            {
                "retention": float(r),
                "events": len(frame),
                "duplicates": int(frame["duplicate"].sum()),
                "duplicate_share": float(frame["duplicate"].mean()),
            }
        )
    return pd.DataFrame(rows)


# ---- claims under contention (notebook 02) -------------------------------------------------------


def contention(run) -> dict:
    """How a run's claims fared: double claims, lost claims (no row back), lock waits,
    drain time."""
    events = run.events
    waits = events.loc[events["kind"] == "lock_wait", "detail"]
    wait_seconds = (
        waits.astype(str).str.rsplit(":", n=1).str[-1].astype(float)
        if len(waits)
        else pd.Series(dtype=float)
    )
    jobs = run.jobs
    done = jobs["completed_at"]
    p = run.scenario.policy
    claims = sum(
        v
        for k, v in run.statement_counts.items()
        if k.startswith("claim_") or k == "lock_next_candidate"
    )
    return {
        "claim": p.claim,
        "workers": p.workers,
        "gap": p.select_to_update_gap,
        "seed": run.scenario.seed,
        "jobs": len(jobs),
        "leases": int(run.summary["leases"]),
        "double_claims": int(run.summary["double_claims"]),
        "lost_claims": int((events["kind"] == "claim_lost").sum()),
        "claim_statements": int(claims),
        "lock_waits": len(waits),
        "lock_wait_seconds": float(wait_seconds.sum()),
        "drain_time": float(done.max()) if done.notna().all() and len(done) else float("nan"),
    }


def claim_contention(
    strategies: Iterable[str] = STRATEGIES,
    workers: Iterable[int] = (4, 8, 16, 32),
    *,
    gap: float = 0.05,
    jobs: int = 400,
    mean_work: float = 0.5,
    seeds: Iterable[int] = (1,),
    scenario: str | Scenario = "read-then-write-race",
) -> pd.DataFrame:
    """contention() of the read-then-write-race batch for each claim strategy, worker count and
    seed.

    gap: the application's time between reading a candidate and writing the claim; with the
    blocking SELECT ... FOR UPDATE it is spent holding the row lock, which is what makes a convoy.
    """
    from sim import runner

    base = as_scenario(scenario)
    rows = []
    for strategy in strategies:
        for n in workers:
            batch = base.with_overrides(
                {
                    "policy.claim": strategy,
                    "policy.workers": int(n),
                    "policy.select_to_update_gap": float(gap),
                    "workload.jobs": int(jobs),
                    "workload.processing": {"kind": "exponential", "mean": float(mean_work)},
                    "expect": [],
                }
            )
            for seed in seeds:
                rows.append(contention(runner.run(batch, seed=seed)))
    return pd.DataFrame(rows)


def compare_logs(a, b, *, tolerance: float = 1e-6) -> pd.DataFrame:
    """Two runs of one scenario (e.g. memory vs postgres), record by record and metric by metric.

    Returns one row per summary metric (a, b, equal) plus a first row 'event log' saying whether
    the records agree (same kinds, workers, jobs, attempts; times within `tolerance`).
    """
    ea, eb = a.events, b.events
    same = len(ea) == len(eb)
    if same:
        for column in ("kind", "worker", "job", "attempt"):
            if (
                not ea[column]
                .astype(str)
                .reset_index(drop=True)
                .equals(eb[column].astype(str).reset_index(drop=True))
            ):
                same = False
                break
        if same:
            same = bool(
                np.allclose(
                    ea["t"].to_numpy(float), eb["t"].to_numpy(float), atol=tolerance, rtol=0
                )
            )
    rows = [{"metric": "event log (records)", "a": len(ea), "b": len(eb), "equal": same}]
    for metric in a.summary.index:
        x, y = a.summary[metric], b.summary.get(metric, np.nan)
        try:
            equal = bool(np.isclose(float(x), float(y), atol=tolerance, rtol=1e-9, equal_nan=True))
        except (TypeError, ValueError):
            equal = x == y
        rows.append({"metric": metric, "a": x, "b": y, "equal": equal})
    return pd.DataFrame(rows).rename(
        columns={"a": a.backend, "b": b.backend if b.backend != a.backend else "b"}
    )
