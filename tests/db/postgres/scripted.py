"""Small scenarios with constant times, so that every instant in a log is predictable."""

from __future__ import annotations

from sim.dists import Dist
from sim.scenario import Faults, Policy, Scenario, Workload

LATENCY = 0.001


def scripted(
    *, jobs=1, work=25.0, workers=1, horizon=120.0, faults=None, workload=None, **policy
) -> Scenario:
    defaults = dict(
        workers=workers,
        poll_interval=1.0,
        lease_ttl=30.0,
        heartbeat_interval=10.0,
        watcher=False,
        watcher_interval=30.0,
        random_phase=False,
        dedup=False,
    )
    return Scenario(
        name="scripted",
        workload=Workload(
            jobs=jobs,
            processing=Dist.constant(work),
            psp_call=Dist.constant(0.0),
            statement_latency=Dist.constant(LATENCY),
            **(workload or {}),
        ),
        policy=Policy(**{**defaults, **policy}),
        faults=faults or Faults(),
        horizon=horizon,
    )


def timeline(
    run, *, skip=("idle", "watcher_tick", "enqueue", "heartbeat", "psp_charge")
) -> list[tuple]:
    return [
        (round(e.t, 6), e.kind, e.worker, e.job, e.attempt) for e in run.log if e.kind not in skip
    ]
