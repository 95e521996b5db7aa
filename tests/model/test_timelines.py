"""Exact timelines of scripted scenarios: constant work, 1 ms statements, no random phases."""

from sim import run
from sim.scenario.dists import Dist
from sim.scenario.settings import Faults, ScriptedCrash

from .scripts import paused_zombie, scripted, timeline


def test_claim_heartbeats_complete():
    r = run(scripted(horizon=40))
    assert timeline(r) == [
        (0.002, "claim", "w0", 1, 1),  # select at 0.001, conditional UPDATE at 0.002
        (10.003, "heartbeat", "w0", 1, 1),  # every 10 s after the claim, 1 ms on the wire
        (12.502, "psp_charge", "w0", 1, 1),  # half way through 25 s of work
        (20.004, "heartbeat", "w0", 1, 1),
        (25.005, "effect", "w0", 1, 1),  # ledger, fenced completion, commit: 3 round trips
        (25.005, "complete", "w0", 1, 1),
    ]
    lease = r.leases.iloc[0]
    assert (lease.end_reason, lease.heartbeats, round(lease.until, 6)) == ("completed", 2, 50.004)
    assert r.table_jobs.loc[0, ["status", "lease_owner", "attempts"]].tolist() == [
        "Completed",
        "w0",
        1,
    ]


def test_crash_expiry_watcher_reclaim():
    """w0 crashes at 25 s; its lease (renewed at 20.004) ends at 50.004; the watcher tick at 60
    requeues the job; w1, polling every ~1 s, claims it as attempt 2."""
    faults = Faults(crashes=(ScriptedCrash(at=25.0, worker=0),), restart_delay=Dist.constant(1000))
    r = run(
        scripted(
            workers=2, work=100, horizon=75, watcher=True, claim_takes_expired=False, faults=faults
        )
    )
    assert timeline(r) == [
        (0.002, "claim", "w0", 1, 1),
        (
            0.002,
            "claim_lost",
            "w1",
            1,
            None,
        ),  # both read job 1; the conditional UPDATE lets one win
        (10.003, "heartbeat", "w0", 1, 1),
        (20.004, "heartbeat", "w0", 1, 1),
        (25.0, "crash", "w0", 1, 1),
        (60.003, "requeue", "watcher", 1, 1),  # ticks at 0, 30.001, 60.002 (+1 ms statement)
        (60.064, "claim", "w1", 1, 2),  # w1's next poll; attempts incremented by the new lease
        (70.065, "heartbeat", "w1", 1, 2),
    ]
    assert r.recoveries[["job", "latency"]].round(6).values.tolist() == [[1, 35.064]]
    crashed = r.leases.iloc[0]
    assert (crashed.end_reason, round(crashed.until, 6)) == ("crashed", 50.004)
    assert r.table_jobs.loc[0, ["status", "lease_owner", "attempts"]].tolist() == [
        "Processing",
        "w1",
        2,
    ]


def _paused_zombie(**policy):
    return run(paused_zombie(**policy))


def test_pause_longer_than_ttl_false_expiry_fenced_completion_rejected():
    r = _paused_zombie()
    assert timeline(r) == [
        (0.002, "claim", "w0", 1, 1),
        (0.002, "claim_lost", "w1", 1, None),
        (2.002, "psp_charge", "w0", 1, 1),
        (5.003, "heartbeat", "w0", 1, 1),  # lease now ends at 20.003
        (6.0, "pause_start", "w0", None, None),  # stop-the-world: no progress, no heartbeats
        (20.024, "claim", "w1", 1, 2),  # the expired lease is taken by w1's next poll
        (22.024, "psp_charge", "w1", 1, 2),  # the card is charged a second time
        (25.025, "heartbeat", "w1", 1, 2),
        (30.026, "heartbeat", "w1", 1, 2),
        (35.027, "heartbeat", "w1", 1, 2),
        (40.027, "effect", "w1", 1, 2),
        (40.027, "complete", "w1", 1, 2),
        (51.0, "pause_end", "w0", None, None),
        (51.001, "heartbeat_rejected", "w0", 1, 1),  # the overdue heartbeat fires and is refused
        (
            65.005,
            "complete_rejected",
            "w0",
            1,
            1,
        ),  # the zombie finishes 45 s late; fencing refuses it
    ]
    first = r.leases.iloc[0]
    assert (first.end_reason, bool(first.false_expiry), round(first.end, 6)) == (
        "expired",
        True,
        20.003,
    )
    assert r.table_ledger["worker"].tolist() == ["w1"]
    assert r.summary["false_expiries"] == 1 and r.summary["duplicate_db_effects"] == 0


def test_pause_without_fencing_applies_the_effect_twice():
    r = _paused_zombie(fencing=False)
    assert timeline(r)[-1] == (65.005, "complete", "w0", 1, 1)
    assert r.table_ledger[["worker", "attempt"]].values.tolist() == [["w1", 2], ["w0", 1]]
    assert r.summary["duplicate_db_effects"] == 1
    report = r.check()
    assert report.counts() == {
        "duplicate_db_effect": 1,
        "duplicate_external_effect": 1,
        "non_owner_completion": 1,
    }


def test_worker_that_learns_it_lost_the_lease_abandons():
    r = _paused_zombie(abandon_on_lost_lease=True)
    assert (65.002, "abandon", "w0", 1, 1) in timeline(r)
    assert "complete_rejected" not in set(r.events.kind)
