"""Which statements wait on another transaction's lock, and which go straight past it.

PostgreSQL evaluates an UPDATE's WHERE on the version the statement sees first: a row that does
not match is skipped without waiting and without being locked. Only a row that matches waits,
and is re-checked (EvalPlanQual) once the holder has ended.
"""

from __future__ import annotations

import pytest

from sim.db.base import Blocked
from sim.db.errors import DeadlockDetectedError, LockNotAvailableError, UniqueViolationError

from .script import job_row


def test_non_matching_updates_do_not_wait(db):
    db.add_jobs(1)
    assert db.claim("A", 1, now=0.0, until=30.0) == [(1, 1)]
    db.begin("A")
    assert db.run("A", "lock_job_nowait", id=1) == [(1, "Processing")]  # A holds the row
    assert db.claim("B", 1, now=1.0, until=31.0) == []  # lease not expired: no wait
    fence_b = {"id": 1, "owner": "B", "attempt": 1, "now": 1.0}
    assert db.run("B", "heartbeat", lease_until=31.0, **fence_b) == []
    db.begin("B")
    assert db.run("B", "complete_fenced", **fence_b) == []
    assert db.run("B", "reject_job_fenced", error="x", **fence_b) == []
    assert db.run(
        "C", "heartbeat", id=1, owner="A", attempt=1, now=2.0, lease_until=40.0
    ) == Blocked("C", "heartbeat", "A")
    db.commit("A")
    assert db.resume("C") == [(1, 40.0)]
    assert db.run("C", "lock_job_nowait", id=1) == [(1, "Processing")]  # B's misses locked nothing
    db.commit("B")
    assert db.jobs() == [job_row(1, "Processing", "A", 40.0, 1, heartbeat=2.0)]


def test_insert_of_an_existing_id_does_not_wait_on_a_mere_lock(db):
    db.add_jobs(1)
    db.begin("A")
    assert db.run("A", "lock_job_nowait", id=1) == [(1, "Pending")]
    with pytest.raises(UniqueViolationError, match="insert_job"):
        db.run("B", "insert_job", id=1, event_id="x", payload="{}", now=1.0)
    db.commit("A")
    assert db.jobs() == [job_row(1)]


@pytest.mark.parametrize("outcome", ["commit", "rollback"])
def test_purge_in_a_transaction_holds_its_markers(db, outcome):
    assert db.run("W", "insert_dedup_marker", event_id="e1", payload_hash="h1", now=0.0) == [
        ("e1",)
    ]
    db.begin("A")
    assert db.run("A", "purge_dedup_markers", before=5.0) == [("e1",)]
    assert db.run("A", "read_dedup_marker", event_id="e1") == []
    assert db.run("B", "read_dedup_marker", event_id="e1") == [("e1", "h1", 0.0)]  # no wait
    assert db.run("B", "purge_dedup_markers", before=5.0) == Blocked(
        "B", "purge_dedup_markers", "A"
    )
    getattr(db, outcome)("A")
    assert db.resume("B") == ([] if outcome == "commit" else [("e1",)])
    assert db.markers() == []


@pytest.mark.parametrize("outcome", ["commit", "rollback"])
def test_marker_insert_waits_on_an_uncommitted_purge(db, outcome):
    assert db.run("W", "insert_dedup_marker", event_id="e1", payload_hash="h1", now=0.0) == [
        ("e1",)
    ]
    db.begin("A")
    assert db.run("A", "purge_dedup_markers", before=5.0) == [("e1",)]
    assert db.run("C", "insert_dedup_marker", event_id="e1", payload_hash="h2", now=6.0) == Blocked(
        "C", "insert_dedup_marker", "A"
    )
    getattr(db, outcome)("A")
    if outcome == "commit":
        assert db.resume("C") == [("e1",)]
        assert db.markers() == [("e1", "h2", 6.0)]
    else:
        assert db.resume("C") == []
        assert db.markers() == [("e1", "h1", 0.0)]


def test_an_update_that_waited_keeps_the_row_locked(db):
    """After waiting, PostgreSQL locks the row's new version before the EvalPlanQual re-check,
    and keeps that lock even when the re-check fails."""
    db.add_jobs(1)
    db.begin("A")
    assert db.claim("A", 1, now=1.0, until=31.0) == [(1, 1)]
    db.begin("B")
    assert db.claim("B", 1, now=2.0, until=32.0) == Blocked("B", "claim_conditional", "A")
    db.commit("A")
    assert db.resume("B") == []
    with pytest.raises(LockNotAvailableError):
        db.run("C", "lock_job_nowait", id=1)
    db.rollback("B")
    assert db.run("C", "lock_job_nowait", id=1) == [(1, "Processing")]


def test_a_resumed_for_update_scan_keeps_its_snapshot(db):
    """The blocking claim resumes on the rows of its start: a job inserted or requeued while it
    waited is not seen, and a row that stopped matching is locked but skipped."""
    db.add_jobs(1, 2, 3)
    assert db.claim("W", 3, now=0.0, until=5.0) == [(3, 1)]
    lock = {"now": 10.0, "take_expired": False}
    db.begin("A")
    assert db.run("A", "lock_next_candidate", **lock) == [(1, 0)]
    db.begin("C")
    assert db.run("C", "lock_next_candidate", **lock) == Blocked("C", "lock_next_candidate", "A")
    db.add_jobs(4, now=11.0)
    assert db.run("W", "requeue_expired", now=12.0, max_attempts=5, limit=5) == [
        (3, "Pending", "W", 1)
    ]
    assert db.claim("B", 2, now=13.0, until=43.0) == [(2, 1)]
    assert db.run("A", "claim_unconditional", id=1, owner="A", now=14.0, lease_until=44.0) == [
        (1, 1)
    ]
    db.commit("A")
    assert db.resume("C") == []  # 1 and 2 were taken; 3 and 4 were not claimable at its start
    for job_id in (1, 2):
        with pytest.raises(LockNotAvailableError):
            db.run("W", "lock_job_nowait", id=job_id)
    assert db.run("W", "lock_job_nowait", id=3) == [(3, "Pending")]
    db.commit("C")
    assert db.run("C", "lock_next_candidate", **{**lock, "now": 20.0}) == [
        (3, 1)
    ]  # requeued at 12: due since


def test_an_error_releases_the_transaction_s_locks_at_once(db):
    """PostgreSQL rolls a transaction back at its first error; only the block stays open."""
    db.add_jobs(1)
    db.begin("A")
    assert db.claim("A", 1, now=1.0, until=31.0) == [(1, 1)]
    with pytest.raises(UniqueViolationError):
        db.run("A", "insert_job", id=1, event_id="e1", payload="{}", now=1.0)
    assert db.claim("B", 1, now=2.0, until=32.0) == [(1, 1)]  # no wait: A's lock is gone
    db.commit("A")
    assert db.jobs() == [job_row(1, "Processing", "B", 32.0, 1, heartbeat=2.0)]


def test_the_statement_closing_a_lock_cycle_fails_with_a_deadlock(db):
    db.add_jobs(1, 2)
    db.begin("A")
    db.begin("B")
    assert db.run("A", "lock_job_nowait", id=1) == [(1, "Pending")]
    assert db.run("B", "lock_job_nowait", id=2) == [(2, "Pending")]
    take = {"now": 1.0, "lease_until": 31.0}
    assert db.run("A", "claim_unconditional", id=2, owner="A", **take) == Blocked(
        "A", "claim_unconditional", "B"
    )
    with pytest.raises(DeadlockDetectedError, match="claim_unconditional") as err:
        db.run("B", "claim_unconditional", id=1, owner="B", **take)
    assert err.value.sqlstate == "40P01"
    assert db.resume("A") == [(2, 1)]  # B's transaction was rolled back at the error
    db.commit("B")
    db.commit("A")
    assert db.jobs() == [job_row(1), job_row(2, "Processing", "A", 31.0, 1, heartbeat=1.0)]
