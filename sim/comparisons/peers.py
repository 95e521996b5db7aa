"""Peer job queues' documented recovery defaults, compared on one shared payment workload.

    from sim.comparisons.peers import compare_peers
    from sim.plots import peer_comparison
    frame = compare_peers(seeds=range(1, 6))   # one row per peer, CIs over the seeds
    peer_comparison(frame)

The presets (sim/scenario/presets/<peer>.toml) differ only in their recovery settings; each file's
header names the version it follows, cites the source line of every default, and says what it
approximates and what Lease Lab cannot express. The workload, faults, workers, poll interval and
horizon are the same for all, and the horizon outlasts the longest recovery window, so recovery
latencies are comparable.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pandas as pd

from sim.errors import ConfigError
from sim.results import owner_crashes
from sim.scenario.settings import preset
from sim.theory.stats import summarize

PEERS = {  # preset name -> display name
    "river": "River",
    "oban-lifeline": "Oban (Lifeline)",
    "graphile-worker": "graphile-worker",
    "pg-boss": "pg-boss",
    "solid-queue": "Solid Queue",
    "sqs-visibility": "SQS",
    "bullmq": "BullMQ (PostgreSQL)",
    "temporal": "Temporal activity",
    "celery-redis": "Celery (Redis)",
    "celery-sqs": "Celery (SQS)",
    "hatchet": "Hatchet",
    "procrastinate": "procrastinate",
}
# the recovery machinery's statements: per-job and per-process heartbeats, every watcher pass
RECOVERY_STATEMENTS = (
    "heartbeat",
    "process_heartbeat",
    "requeue_expired",
    "reclaim_stalled",
    "prune_processes",
    "select_stuck_jobs",
    "rescue_job",
)
METRICS = (
    "crashed_jobs",  # crashes of a job's current owner (owner_crashes)
    "recoveries",  # ... after which the job was claimed again
    # ... share not claimed again before the horizon (failed, stuck, or censored)
    "unrecovered_share",
    "recovery_latency_mean",
    "recovery_latency_p95",  # crash -> claimed again (s)
    # crash -> the job left Processing (requeued, failed or re-claimed) (s)
    "detection_latency_mean",
    "false_expiries",  # leases expired under a live owner
    "double_processed_jobs",  # jobs a live owner was still working on when another worker took them
    "duplicate_external_effects",
    "duplicate_db_effects",
    "dead",
    "statements_per_s",  # DB load: every statement
    "recovery_statements_per_s",  # the recovery machinery's share (RECOVERY_STATEMENTS)
)


def recovery_mechanism(policy) -> str:
    """How a crashed worker's job comes back: 'claim takes expired', 'watcher requeues', 'watcher
    fails the job', 'process prune requeues', 'process prune fails the job' or 'none'."""
    if policy.process_heartbeat_interval and policy.watcher:
        return (
            "process prune fails the job"
            if policy.prune_action == "dead"
            else "process prune requeues"
        )
    if policy.claim_takes_expired:
        return "claim takes expired"
    if policy.watcher:
        return "watcher fails the job" if policy.watcher_action == "dead" else "watcher requeues"
    return "none"


def recovery_window(policy) -> float:
    """The longest a crashed owner's job can wait to be found (s): the lease (capped by the
    execution timeout) or the process's stale age, plus a watcher interval (a poll without one)."""
    lease = policy.lease_ttl
    if policy.execution_timeout:
        lease = min(lease, policy.execution_timeout)
    if policy.process_heartbeat_interval:
        lease = min(lease, policy.process_stale_after + policy.process_heartbeat_interval)
    return lease + (policy.watcher_interval if policy.watcher else policy.poll_interval)


SETTINGS = (
    "claim",
    "prefetch",
    "claim_takes_expired",
    "lease_ttl",
    "heartbeat",
    "heartbeat_interval",
    "watcher",
    "watcher_interval",
    "watcher_action",
    "rescue",
    "stall_check",
    "max_stalls",
    "process_heartbeat_interval",
    "process_stale_after",
    "execution_timeout",
    "max_attempts",
    "fencing",
)
OFF = "off"  # in settings_table: an interval whose mechanism the preset does not run
NOT_APPLICABLE = "\u2014"  # ... and a setting of that mechanism that is not an interval


def settings_table(names: Iterable[str] | None = None) -> pd.DataFrame:
    """The peers' recovery settings (SETTINGS), one row per preset, indexed by display name.

    A preset without a heartbeat shows heartbeat_interval "off", one without a watcher shows
    watcher_interval "off" and watcher_action "\u2014" (likewise process liveness, the execution
    timeout and a stall budget apart from the attempts): their Policy still holds default values,
    which no run uses and nobody should read as the queue's setting.
    """
    rows = []
    for name in PEERS if names is None else names:
        policy = preset(name).policy
        row = {"queue": PEERS.get(name, name), **{k: getattr(policy, k) for k in SETTINGS}}
        if not policy.heartbeat:
            row["heartbeat_interval"] = OFF
        if not policy.watcher:
            row["watcher_interval"], row["watcher_action"] = OFF, NOT_APPLICABLE
            row["rescue"] = NOT_APPLICABLE
        if not policy.process_heartbeat_interval:
            row["process_heartbeat_interval"] = OFF
            row["process_stale_after"] = NOT_APPLICABLE
        if not policy.execution_timeout:
            row["execution_timeout"] = OFF
        if policy.max_stalls is None:
            row["max_stalls"] = NOT_APPLICABLE
        rows.append(row)
    return pd.DataFrame(rows, columns=["queue", *SETTINGS]).set_index("queue")


def detection_waits(run, *, claimable: bool = False) -> np.ndarray:
    """Per crash of a job's owner (owner_crashes): crash -> the job was found, i.e. left
    Processing (the watcher or a prune requeued or failed it, or a claim took it); NaN if never.
    `claimable`: where the claim itself takes expired leases, the job is found when its lease ran
    out (the crashed owner's last renewal + TTL), not at the next poll. The longest is the worst
    wait an `advise --as` translation prints (sim.advice.queue_terms)."""
    crashes = owner_crashes(run)
    events = run.events
    moves = events[events["kind"].isin(["requeue", "claim"])]
    by_job = {job: g["t"].to_numpy() for job, g in moves.groupby("job")}
    dying = events[events["kind"].isin(["crash", "drop", "release_lost"]) & events["job"].notna()]
    ends = {
        (t, worker, job): until
        for t, worker, job, until in zip(
            dying["t"], dying["worker"], dying["job"], dying["detail"], strict=True
        )
    }
    waits = []
    for crash in crashes.itertuples():
        later = by_job.get(crash.job, np.array([]))
        later = later[later > crash.crash_at]
        found = later.min() if len(later) else np.nan
        if claimable and run.scenario.policy.claim_takes_expired:
            until = ends.get((crash.crash_at, crash.worker, crash.job))
            if isinstance(until, float):
                found = min(found, until)
        waits.append(found - crash.crash_at)
    return np.asarray(waits, dtype=float)


def peer_metrics(run) -> dict[str, float]:
    """The comparison's metrics of one run (see METRICS), all from its event log."""
    s = run.summary
    crashes = owner_crashes(run)
    leases = run.leases
    first_move = detection_waits(run)
    latency = crashes["latency"].dropna()
    per_job = leases.groupby("job").size()
    expired_jobs = leases.loc[leases["false_expiry"], "job"].unique()
    counts = run.statement_counts
    horizon = run.scenario.horizon
    crashed = len(crashes)
    return {
        "crashed_jobs": crashed,
        "recoveries": len(latency),
        "unrecovered_share": float(crashes["latency"].isna().mean()) if crashed else np.nan,
        "recovery_latency_mean": float(latency.mean()) if len(latency) else np.nan,
        "recovery_latency_p95": float(np.percentile(latency, 95)) if len(latency) else np.nan,
        "detection_latency_mean": float(np.nanmean(first_move))
        if np.isfinite(first_move).any()
        else np.nan,
        "false_expiries": int(s["false_expiries"]),
        "double_processed_jobs": int(sum(per_job.get(j, 0) > 1 for j in expired_jobs)),
        "duplicate_external_effects": int(s["duplicate_external_effects"]),
        "duplicate_db_effects": int(s["duplicate_db_effects"]),
        "dead": int(s["dead"]),
        "statements_per_s": float(s["statements_per_s"]),
        "recovery_statements_per_s": sum(counts.get(k, 0) for k in RECOVERY_STATEMENTS) / horizon,
    }


def _measure(task: tuple[str, int, dict]) -> dict:
    from sim import runner

    name, seed, overrides = task
    run = runner.run(name, seed=seed, **overrides)
    return {"peer": name, "seed": seed, **peer_metrics(run)}


def _listed(name: str, values, kind: type) -> list:
    """`values` as a list, each a `kind` (bools are no ints); ConfigError naming `name` if not."""
    if isinstance(values, str | bytes | dict) or not hasattr(values, "__iter__"):
        raise ConfigError(f"{name}: expected a list, got {type(values).__name__} {values!r:.60}")
    out = list(values)
    for i, value in enumerate(out):
        if isinstance(value, bool) or not isinstance(
            value, kind | (np.integer if kind is int else kind)
        ):
            raise ConfigError(
                f"{name}[{i}]: expected a {kind.__name__}, got {type(value).__name__} {value!r:.60}"
            )
    return out


def compare_peers(
    names: Iterable[str] | None = None,
    seeds: Iterable[int] = range(1, 6),
    *,
    confidence: float = 0.95,
    executor=None,
    **overrides,
) -> pd.DataFrame:
    """One row per peer preset: its settings, `n` and `<metric>_mean/_ci_low/_ci_high` over `seeds`.

    `overrides` are dotted keys applied to every peer (e.g. **{"workload.jobs": 300}); `executor`
    is any concurrent.futures Executor (runs are independent). The per-run rows are in
    `frame.attrs["runs"]`.
    """
    if not (executor is None or callable(getattr(executor, "map", None))):
        raise ConfigError(f"executor: expected a concurrent.futures.Executor, got {executor!r:.60}")
    names = list(PEERS if names is None else _listed("names", names, str))
    seeds = _listed("seeds", seeds, int)
    scenarios = {
        name: preset(name).with_overrides(overrides) if overrides else preset(name)
        for name in names
    }
    tasks = [(name, seed, overrides) for name in names for seed in seeds]
    results = list(executor.map(_measure, tasks) if executor is not None else map(_measure, tasks))
    runs = pd.DataFrame(results, columns=["peer", "seed", *METRICS])
    agg = (
        summarize(runs, "peer", list(METRICS), confidence)
        .set_index("peer")
        .loc[names]
        .reset_index()
    )
    settings = []
    for name in names:
        p = scenarios[name].policy
        settings.append(
            {
                "peer": name,
                "label": PEERS.get(name, name),
                "recovery": recovery_mechanism(p),
                "claim": p.claim,
                "lease_ttl": p.lease_ttl,
                "heartbeat_interval": p.heartbeat_interval if p.heartbeat else np.nan,
                "watcher_interval": p.watcher_interval if p.watcher else np.nan,
                "process_heartbeat_interval": p.process_heartbeat_interval or np.nan,
                "process_stale_after": p.process_stale_after
                if p.process_heartbeat_interval
                else np.nan,
                "execution_timeout": p.execution_timeout or np.nan,
                "max_attempts": p.max_attempts,
            }
        )
    frame = pd.DataFrame(settings).merge(agg, on="peer")
    frame.attrs["runs"] = runs
    frame.attrs["confidence"] = confidence
    return frame
