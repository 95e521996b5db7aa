"""Random scenarios for the differential tests: small, contended and faulty, so that lock waits,
EvalPlanQual re-checks, SKIP LOCKED, dedup-marker waits and rollbacks by crash all happen; with the
fidelity settings of issue #16 (watcher gap, retry backoff, deadline, graceful shutdown) and the
mechanisms of issue #25 (worker clocks, execution timeout, two-phase stall check and stall budget,
process liveness and worker identity, batch claims, the rescue path as a job, lost releases)."""

from __future__ import annotations

import warnings

from hypothesis import strategies as st

from sim.scenario.dists import Dist
from sim.scenario.settings import (
    CLAIM_STRATEGIES,
    ClockStep,
    CrashPoint,
    Faults,
    Policy,
    Scenario,
    ScriptedCrash,
    ScriptedOutage,
    Workload,
    validate,
)


def _dist(draw, low: float, high: float) -> Dist:
    kind = draw(st.sampled_from(["constant", "exponential", "lognormal", "uniform"]))
    median = draw(st.floats(low, high))
    if kind == "constant":
        return Dist.constant(median)
    if kind == "exponential":
        return Dist.exponential(median)
    if kind == "uniform":
        return Dist.uniform(median / 2, median * 1.5)
    return Dist.lognormal(median, median * draw(st.floats(1.5, 8.0)))


def _latency(draw) -> Dist:
    if draw(st.booleans()):
        return Dist.constant(draw(st.sampled_from([0.001, 0.002, 0.005])))
    median = draw(st.floats(0.0005, 0.005))
    return Dist.lognormal(median, median * draw(st.floats(1.5, 10.0)))


@st.composite
def scenarios(draw) -> Scenario:
    """A scenario of 2-8 workers, any claim strategy, faults of every kind, 10-40 simulated
    seconds."""
    workers = draw(st.integers(2, 8))
    horizon = float(draw(st.integers(10, 40)))
    ttl = draw(st.floats(0.5, 8.0))
    workload = Workload(
        jobs=draw(st.integers(3, 40)),
        arrival=draw(st.sampled_from(["batch", "poisson"])),
        rate=draw(st.floats(1.0, 20.0)),
        processing=_dist(draw, 0.05, 3.0),
        psp_at=draw(st.sampled_from([0.0, 0.3, 0.5, 1.0])),
        psp_call=_dist(draw, 0.01, 0.5),
        statement_latency=_latency(draw),
        duplicate_delivery=draw(st.sampled_from([0.0, 0.0, 0.3, 1.0])),
        redelivery_delay=draw(
            st.sampled_from([Dist.constant(0.0), Dist.exponential(0.5), Dist.constant(2.0)])
        ),
        payload_mismatch=draw(st.sampled_from([0.0, 0.2, 1.0])),
    )
    two_phase = draw(st.sampled_from([False, False, True]))  # BullMQ's stall check (issue #25)
    processes = draw(st.sampled_from([0.0, 0.0, 0.3, 1.0]))  # process liveness (issue #25)
    claim = draw(st.sampled_from(CLAIM_STRATEGIES))
    watcher = True if two_phase or processes else draw(st.booleans())
    rescue = draw(st.sampled_from(["watcher", "job"])) if watcher else "watcher"  # issue #25
    shutdown = draw(st.sampled_from(["crash", "crash", "graceful"]))
    prefetch = draw(st.sampled_from([1, 4, 8])) if claim == "skip_locked" else 1  # issue #25
    policy = Policy(
        workers=workers,
        poll_interval=draw(st.floats(0.05, 1.0)),
        claim=claim,
        prefetch=prefetch,
        claim_takes_expired=draw(st.booleans()),
        candidates=draw(st.integers(1, 3)),
        select_to_update_gap=draw(st.sampled_from([0.0, 0.0, 0.001, 0.01, 0.1])),
        lease_ttl=ttl,
        heartbeat=draw(st.booleans()),
        heartbeat_interval=ttl * draw(st.floats(0.2, 0.9)),
        watcher=watcher,
        rescue=rescue,
        watcher_interval=draw(st.floats(0.2, 5.0)),
        watcher_action=draw(st.sampled_from(["requeue", "requeue", "dead"])),
        watcher_batch=draw(st.integers(1, 5)),
        max_attempts=draw(st.integers(1, 5)),
        fencing=draw(st.booleans()),
        dedup=draw(st.booleans()),
        idempotency_key=draw(st.booleans()),
        abandon_on_lost_lease=draw(st.booleans()),
        clock=draw(st.sampled_from(["db", "db", "worker"])),
        random_phase=draw(st.booleans()),
        watcher_gap=0.0
        if two_phase
        else draw(st.sampled_from([0.0, 0.05, 0.5])),  # read-then-write watcher (River #1302)
        stall_check="two_phase" if two_phase else "single",
        max_stalls=draw(st.sampled_from([None, 0, 0, 1])) if two_phase or processes else None,
        process_heartbeat_interval=processes,
        process_stale_after=draw(st.sampled_from([0.8, 2.5])),
        prune_action=draw(st.sampled_from(["requeue", "requeue", "dead"])),
        worker_identity=draw(st.sampled_from(["reused", "fresh"])),
        retry_backoff=draw(st.sampled_from([0.0, 0.0, 0.01, 0.2])),  # seconds x attempts^4
        deadline=draw(
            st.sampled_from([0.0, 0.0, 0.3, ttl * 0.5])
        ),  # worker-side deadline (pg-boss #555)
        execution_timeout=draw(st.sampled_from([0.0, 0.0, 0.0, 1.0, ttl * 0.7])),  # issue #25
        deadline_action=draw(st.sampled_from(["drop", "drop", "complete", "cancel"])),  # issue #31
        completion=draw(st.sampled_from(["transaction", "transaction", "background"])),
    )
    at = st.floats(0.0, horizon)
    worker = st.integers(0, workers - 1)
    crashes = draw(
        st.lists(
            st.one_of(
                st.builds(ScriptedCrash, at=at, worker=worker),
                st.builds(ScriptedCrash, at=at, job=st.integers(1, 5)),
            ),
            max_size=3,
        )
    )
    outage = st.builds(ScriptedOutage, worker=worker, at=at, duration=st.floats(0.1, 10.0))
    faults = Faults(
        crash_rate=draw(st.sampled_from([0.0, 0.0, 200.0, 1000.0])),
        crashes=tuple(crashes),
        restart_delay=_dist(draw, 0.01, 3.0),
        pause_rate=draw(st.sampled_from([0.0, 0.0, 300.0])),
        pause_duration=_dist(draw, 0.1, 5.0),
        pauses=tuple(draw(st.lists(outage, max_size=2))),
        heartbeat_loss=draw(st.sampled_from([0.0, 0.0, 0.3])),
        heartbeat_delay=draw(st.sampled_from([Dist.constant(0.0), Dist.exponential(0.5)])),
        partition_rate=draw(st.sampled_from([0.0, 0.0, 300.0])),
        partition_duration=_dist(draw, 0.1, 5.0),
        partitions=tuple(draw(st.lists(outage, max_size=2))),
        partition_mode=draw(st.sampled_from(["fail", "hang"])),
        crash_points=tuple(
            draw(
                st.lists(
                    st.builds(
                        CrashPoint,
                        point=st.sampled_from(["after_psp", "after_marker"]),
                        probability=st.sampled_from([0.3, 1.0]),
                        limit=st.integers(1, 3),
                    ),
                    max_size=2,
                    unique_by=lambda c: c.point,
                )
            )
        ),
        clock_skew=draw(st.sampled_from([0.0, 0.1, 1.0])),
        # worker clocks (issue #25): an offset, a drift rate and a step, stamped into leases
        clock_offset=draw(st.sampled_from([0.0, 0.0, -2.0, 1.5])),
        clock_drift_ppm=draw(st.sampled_from([0.0, 0.0, 20_000.0, -30_000.0])),
        clock_steps=tuple(
            draw(
                st.lists(
                    st.builds(ClockStep, worker=worker, at=at, by=st.sampled_from([-3.0, 2.0])),
                    max_size=1,
                )
            )
        ),
        shutdown=shutdown,
        release_loss=0.5 if shutdown == "graceful" else 0.0,  # each release: kept or lost
    )
    scenario = Scenario(
        name="generated",
        workload=workload,
        policy=policy,
        faults=faults,
        horizon=horizon,
        seed=draw(st.integers(0, 2**31)),
    )
    with warnings.catch_warnings():  # generated settings may be risky on purpose
        warnings.simplefilter("ignore")
        return validate(scenario)
