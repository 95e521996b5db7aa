"""Seed 2 on the model: marker + effect in one transaction make duplicate delivery harmless."""

from sim import run
from sim.scenario.dists import Dist
from sim.scenario.settings import CrashPoint, Faults, Workload

from .scripts import LATENCY, scripted, timeline


def _redelivered(delay: float, **policy):
    scenario = scripted(workers=2, dedup=True, horizon=90, **policy)
    workload = Workload(
        jobs=1,
        processing=Dist.constant(25.0),
        psp_call=Dist.constant(0.0),
        statement_latency=Dist.constant(LATENCY),
        duplicate_delivery=1.0,
        redelivery_delay=Dist.constant(delay),
    )
    return run(scenario.replace(workload=workload))


def test_sequential_redelivery_is_applied_once():
    r = _redelivered(40.0)
    kinds = [
        (kind, job)
        for _, kind, _, job, _ in timeline(r)
        if kind in ("effect", "dedup_skip", "complete")
    ]
    assert kinds == [("effect", 1), ("complete", 1), ("dedup_skip", 2), ("complete", 2)]
    assert r.table_ledger["event_id"].tolist() == ["evt-1"]
    assert [row[0] for row in r.tables["processed_events"]] == ["evt-1"]


def test_concurrent_redelivery_second_insert_waits_then_skips():
    r = _redelivered(0.0)
    story = timeline(r, skip=("idle", "watcher_tick", "enqueue", "heartbeat", "psp_charge"))
    assert story == [
        (0.002, "claim", "w0", 1, 1),
        (0.002, "claim_lost", "w1", 1, None),
        (0.004, "claim", "w1", 2, 1),  # the redelivery, as its own job, runs in parallel
        (25.006, "effect", "w0", 1, 1),
        (25.006, "complete", "w0", 1, 1),
        (25.006, "lock_wait", "w1", 2, None),  # w1's marker INSERT waited for w0's open transaction
        (25.009, "dedup_skip", "w1", 2, 1),  # ... and found the marker committed: no effect
        (25.009, "complete", "w1", 2, 1),
    ]
    wait = r.events[r.events.kind == "lock_wait"].iloc[0]
    assert wait.detail == "w0:0.001000"
    assert r.table_ledger["event_id"].tolist() == ["evt-1"]


def test_crash_after_marker_rolls_back_and_the_retry_applies_once():
    faults = Faults(crash_points=(CrashPoint("after_marker"),), restart_delay=Dist.constant(5.0))
    r = run(scripted(workers=2, dedup=True, watcher=True, horizon=120, faults=faults))
    story = [
        (kind, worker, attempt)
        for _, kind, worker, _, attempt in timeline(r)
        if kind not in ("heartbeat", "psp_charge")
    ]
    assert story == [
        ("claim", "w0", 1),
        ("claim_lost", "w1", None),
        ("crash", "w0", 1),  # right after its marker INSERT: the transaction rolls back
        ("restart", "w0", None),
        ("claim", "w0", 2),  # the lease lapsed; the job is retried
        ("effect", "w0", 2),
        ("complete", "w0", 2),
    ]
    assert r.table_ledger[["event_id", "attempt"]].values.tolist() == [["evt-1", 2]]
    assert [row[0] for row in r.tables["processed_events"]] == ["evt-1"]


def test_same_event_other_payload_is_rejected_by_policy():
    scenario = scripted(workers=1, dedup=True, horizon=90)
    workload = Workload(
        jobs=1,
        processing=Dist.constant(5.0),
        psp_call=Dist.constant(0.0),
        statement_latency=Dist.constant(LATENCY),
        duplicate_delivery=1.0,
        redelivery_delay=Dist.constant(20.0),
        payload_mismatch=1.0,
    )
    r = run(scenario.replace(workload=workload))
    jobs = r.table_jobs.set_index("id")
    assert jobs.loc[1, "status"] == "Completed"
    assert jobs.loc[2, "status"] == "Dead"
    assert "payload differs" in jobs.loc[2, "last_error"]
    assert (r.events.kind == "payload_conflict").sum() == 1
    assert r.table_ledger["job_id"].tolist() == [1]
