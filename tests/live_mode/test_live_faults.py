"""Faults live mode used to refuse, played live as the simulation plays them (issue 24, "Also"):
crash points (one run-wide limit shared by the worker processes), the read-then-write watcher
(watcher_gap), worker clocks with an offset (policy.clock = worker), the worker-side deadline
(the handler runs on, the job is failed for a retry) and graceful shutdown (the worker releases
its job). Two short runs with scripted faults; times are judged with generous margins (a loaded
machine delays a process by tens of milliseconds), the order and the counts exactly."""

from __future__ import annotations

import pytest

import sim
from sim.db.memory import MemoryBackend
from sim.model.world import build
from sim.scenario.dists import Dist
from sim.scenario.settings import CrashPoint, Faults, ScriptedCrash
from tests.live_mode.test_live_run import _children, _live_backends
from tests.model.scripts import scripted, with_deadline

# server_wide: they count every live session and stopped server process on the server
pytestmark = [pytest.mark.live, pytest.mark.postgres, pytest.mark.server_wide]

SLACK = 0.3  # scenario seconds a loaded machine may add to a live step


def _records(r, *kinds):
    return [e for e in r.log if e.kind in kinds]


@pytest.mark.timeout(240)
def test_crash_points_a_gapped_watcher_and_worker_clocks_live(pg_dsn):
    scenario = scripted(
        workers=2,
        jobs=6,
        work=0.6,
        lease_ttl=1.0,
        heartbeat_interval=0.3,
        watcher=True,
        watcher_interval=0.5,
        watcher_gap=0.1,
        claim_takes_expired=False,
        clock="worker",
        horizon=5.0,
        faults=Faults(
            crash_points=(CrashPoint("after_psp", 1.0, 2),),
            clock_skew=0.05,
            restart_delay=Dist.constant(0.5),
        ),
    )
    r = sim.live(scenario, duration=scenario.horizon, dsn=pg_dsn)
    assert r.incidents == []  # the crash-point deaths are the workers' own, and expected
    crashes = _records(r, "crash")
    assert len(crashes) == 2  # the limit holds across the worker processes
    for crash in crashes:
        charges = [
            e for e in _records(r, "psp_charge") if e.worker == crash.worker and e.t <= crash.t
        ]
        last = charges[-1]  # it died right after its PSP call, holding that job
        assert (last.job, last.attempt) == (crash.job, crash.attempt)
        assert crash.t - last.t < SLACK
        restart = [e for e in _records(r, "restart") if e.worker == crash.worker and e.t > crash.t]
        assert restart and restart[0].t >= crash.t + 0.5
        requeued = [e for e in _records(r, "requeue") if e.job == crash.job and e.t > crash.t]
        assert requeued, f"job {crash.job} was never rescued"  # the gapped watcher rescues it
    assert r.statement_counts["select_stuck_jobs"] >= 1 and r.statement_counts["rescue_job"] >= 1
    assert r.statement_counts.get("requeue_expired", 0) == 0
    # each worker's clock is the simulation's, offset included, and its leases are written by it
    model = build(scenario, MemoryBackend())
    assert r.worker_skews == {w.name: w.db.clock.offset for w in model.workers}
    assert len(set(r.worker_skews.values())) == 2
    for claim in _records(r, "claim"):
        written = claim.detail - claim.t - scenario.policy.lease_ttl
        assert abs(written - r.worker_skews[claim.worker]) < 0.05
    assert _children() == [] and _live_backends(pg_dsn) == 0


@pytest.mark.timeout(240)
def test_the_deadline_and_graceful_shutdown_live(pg_dsn):
    """3 s jobs and a 1.5 s worker-side deadline (pg-boss): each lease is failed for a retry
    1.5 s after its claim, the handler running on to a result the worker drops; w0 is asked
    to stop at 1 s (faults.shutdown = graceful): it logs the shutdown, releases its job and is
    back a second later, with no crash anywhere."""
    scenario = with_deadline(
        work=3,
        deadline=1.5,
        workers=2,
        jobs=2,
        horizon=5,
        faults=Faults(
            crashes=(ScriptedCrash(at=1.0, worker=0),),
            shutdown="graceful",
            restart_delay=Dist.constant(1.0),
        ),
    )
    r = sim.live(scenario, duration=scenario.horizon, dsn=pg_dsn)
    assert r.incidents == [] and _records(r, "crash") == []
    [shutdown] = _records(r, "shutdown")
    first = [e for e in _records(r, "claim") if e.worker == "w0"][0]
    assert shutdown.worker == "w0" and 1.0 <= shutdown.t < 1.0 + SLACK
    assert (shutdown.job, shutdown.attempt) == (first.job, first.attempt)
    [release] = _records(r, "release")
    assert (release.worker, release.job, release.attempt, release.detail) == (
        "w0",
        first.job,
        first.attempt,
        "Pending",
    )
    assert release.t - shutdown.t < SLACK
    [restart] = _records(r, "restart")
    assert restart.worker == "w0" and restart.t >= release.t + 1.0
    deadlines = {(e.worker, e.job, e.attempt): e for e in _records(r, "deadline")}
    stopped = {(shutdown.worker, shutdown.job, shutdown.attempt)}
    for claim in _records(r, "claim"):
        key = (claim.worker, claim.job, claim.attempt)
        if key in stopped or claim.t > scenario.horizon - 1.5 - SLACK:
            continue
        failed = deadlines[key]  # failed for a retry at its deadline, not before
        assert claim.t + 1.5 <= failed.t < claim.t + 1.5 + SLACK and failed.detail == "Pending"
    # every handler outlives its deadline: its result is dropped (deadline_action = drop), no
    # completion is sent
    assert _records(r, "complete") == [] == _records(r, "complete_rejected")
    late = _records(r, "late_result")
    assert late and all((e.worker, e.job, e.attempt) in deadlines for e in late)
    assert r.statement_counts["fail_job_fenced"] >= 2
    assert r.statement_counts["release_job_fenced"] == 1
    assert _children() == [] and _live_backends(pg_dsn) == 0


@pytest.mark.timeout(240)
def test_a_deadline_that_cancels_stops_the_handler_live(pg_dsn):
    """deadline_action = cancel: at the deadline the handler's steps stop (nothing of it is
    recorded after its cancel, no result comes late) and its server backend is ended, so nothing
    it had open commits; the job is failed for a retry right after."""
    scenario = with_deadline(work=3, deadline=1.5, workers=2, jobs=2, horizon=4).with_overrides(
        {"policy.deadline_action": "cancel"}
    )
    r = sim.live(scenario, duration=scenario.horizon, dsn=pg_dsn)
    assert r.incidents == []
    cancels = _records(r, "cancel")
    deadlines = {(e.worker, e.job, e.attempt): e for e in _records(r, "deadline")}
    assert cancels and all((e.worker, e.job, e.attempt) in deadlines for e in cancels)
    for cancel in cancels:
        later = [
            e
            for e in r.log
            if (e.worker, e.job, e.attempt) == (cancel.worker, cancel.job, cancel.attempt)
            and e.t > cancel.t
            and e.kind != "deadline"
        ]
        assert later == []
    assert _records(r, "late_result") == [] == _records(r, "complete")
    assert r.table_ledger.empty
    assert _children() == [] and _live_backends(pg_dsn) == 0
