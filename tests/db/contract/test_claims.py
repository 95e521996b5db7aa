"""Claims racing each other: lost update, EvalPlanQual re-check, SKIP LOCKED, NOWAIT, FOR UPDATE."""

from __future__ import annotations

import pytest

from sim.db.base import Blocked
from sim.db.errors import LockNotAvailableError, TransactionAbortedError

from .script import job_row


def test_read_then_write_loses_an_update(db):
    """Hermitage P4: both read Pending, both claim unconditionally, both get a row."""
    db.add_jobs(1)
    db.begin("A")
    db.begin("B")
    pending = [(1, "Pending", None, None, 0)]
    assert db.run("A", "select_candidates", now=1.0, take_expired=True, limit=1) == pending
    assert db.run("B", "select_candidates", now=1.0, take_expired=True, limit=1) == pending
    assert db.run("A", "claim_unconditional", id=1, owner="A", now=1.0, lease_until=31.0) == [
        (1, 1)
    ]
    assert db.run(
        "B", "claim_unconditional", id=1, owner="B", now=1.0, lease_until=31.0
    ) == Blocked("B", "claim_unconditional", "A")
    db.commit("A")
    assert db.resume("B") == [(1, 2)]
    db.commit("B")
    assert db.jobs() == [job_row(1, "Processing", "B", 31.0, 2, heartbeat=1.0)]


@pytest.mark.parametrize("outcome", ["commit", "rollback"])
def test_conditional_claim_waits_then_rechecks(db, outcome):
    """The seed's claim waits on a claim held in a transaction, then re-evaluates its WHERE."""
    db.add_jobs(1)
    db.begin("A")
    assert db.claim("A", 1, now=1.0, until=31.0) == [(1, 1)]
    assert db.claim("B", 1, now=2.0, until=32.0) == Blocked("B", "claim_conditional", "A")
    assert db.resume("B") == Blocked("B", "claim_conditional", "A")  # A has not ended yet
    getattr(db, outcome)("A")
    if outcome == "commit":
        assert db.resume("B") == []
        assert db.jobs() == [job_row(1, "Processing", "A", 31.0, 1, heartbeat=1.0)]
    else:
        assert db.resume("B") == [(1, 1)]
        assert db.jobs() == [job_row(1, "Processing", "B", 32.0, 1, heartbeat=2.0)]


def test_conditional_claim_takes_an_expired_lease(db):
    db.add_jobs(1)
    assert db.claim("A", 1, now=0.0, until=30.0) == [(1, 1)]
    assert db.claim("B", 1, now=30.0, until=60.0) == []  # lease_until < now is strict
    assert db.claim("B", 1, now=30.000001, until=60.0) == [(1, 2)]
    assert db.jobs() == [job_row(1, "Processing", "B", 60.0, 2, heartbeat=30.000001)]


def test_skip_locked_hands_out_different_jobs(db):
    db.add_jobs(1, 2, 3)
    skip = {"now": 1.0, "lease_until": 31.0, "take_expired": False}
    db.begin("A")
    assert db.run("A", "claim_skip_locked", owner="A", **skip) == [(1, 1)]
    assert db.run("B", "claim_skip_locked", owner="B", **skip) == [(2, 1)]  # no wait
    db.commit("A")
    assert db.run("C", "claim_skip_locked", owner="C", **skip) == [(3, 1)]
    assert db.run("B", "claim_skip_locked", owner="B", **skip) == []
    assert db.jobs() == [
        job_row(1, "Processing", "A", 31.0, 1, heartbeat=1.0),
        job_row(2, "Processing", "B", 31.0, 1, heartbeat=1.0),
        job_row(3, "Processing", "C", 31.0, 1, heartbeat=1.0),
    ]


def test_nowait_fails_at_once_and_aborts_the_transaction(db):
    db.add_jobs(1, 2)
    db.begin("A")
    assert db.claim("A", 1, now=1.0, until=31.0) == [(1, 1)]
    db.begin("B")
    assert db.claim("B", 2, now=1.0, until=31.0) == [(2, 1)]
    with pytest.raises(LockNotAvailableError, match="lock_job_nowait") as err:
        db.run("B", "lock_job_nowait", id=1)
    assert err.value.sqlstate == "55P03"
    with pytest.raises(TransactionAbortedError, match="select_candidates"):
        db.run("B", "select_candidates", now=1.0, take_expired=False, limit=5)
    assert db.in_transaction("B")
    db.commit("B")  # commit of an aborted transaction rolls back
    assert not db.in_transaction("B")
    db.commit("A")
    assert db.jobs() == [job_row(1, "Processing", "A", 31.0, 1, heartbeat=1.0), job_row(2)]
    assert db.run("B", "lock_job_nowait", id=1) == [(1, "Processing")]  # usable again


@pytest.mark.parametrize("outcome", ["commit", "rollback"])
def test_for_update_convoy(db, outcome):
    """Blocking claim: B waits on A's lock; after A claims and commits B locks the next job."""
    db.add_jobs(1, 2)
    lock = {"now": 1.0, "take_expired": False}
    db.begin("A")
    assert db.run("A", "lock_next_candidate", **lock) == [(1, 0)]
    db.begin("B")
    assert db.run("B", "lock_next_candidate", **lock) == Blocked("B", "lock_next_candidate", "A")
    assert db.run("A", "claim_unconditional", id=1, owner="A", now=1.0, lease_until=31.0) == [
        (1, 1)
    ]
    getattr(db, outcome)("A")
    got = 2 if outcome == "commit" else 1
    assert db.resume("B") == [(got, 0)]
    assert db.run("B", "claim_unconditional", id=got, owner="B", now=2.0, lease_until=32.0) == [
        (got, 1)
    ]
    db.commit("B")
    b_row = job_row(got, "Processing", "B", 32.0, 1, heartbeat=2.0)
    if outcome == "commit":
        assert db.jobs() == [job_row(1, "Processing", "A", 31.0, 1, heartbeat=1.0), b_row]
    else:
        assert db.jobs() == [b_row, job_row(2)]


def test_waiters_queue_behind_the_first_waiter(db):
    """Three clients on one row: the second waiter reports the transaction holding the lock;
    after the holder commits the first waiter gets the row and the second waits on it."""
    db.add_jobs(1)
    db.begin("A")
    db.begin("B")
    db.begin("C")
    assert db.run("A", "lock_job_nowait", id=1) == [(1, "Pending")]
    take = {"id": 1, "now": 1.0, "lease_until": 31.0}
    assert db.run("B", "claim_unconditional", owner="B", **take) == Blocked(
        "B", "claim_unconditional", "A"
    )
    assert db.run("C", "claim_unconditional", owner="C", **take) == Blocked(
        "C", "claim_unconditional", "A"
    )
    db.commit("A")
    assert db.resume("B") == [(1, 1)]
    assert db.resume("C") == Blocked("C", "claim_unconditional", "B")
    db.commit("B")
    assert db.resume("C") == [(1, 2)]
    db.commit("C")
    assert db.jobs() == [job_row(1, "Processing", "C", 31.0, 2, heartbeat=1.0)]
