"""The stuck watcher: requeue expired leases, kill jobs out of attempts, skip locked rows."""

from __future__ import annotations

from .script import job_row


def test_requeue_expired(db):
    db.add_jobs(1, 2, 3, 4, 5)
    assert db.claim("A", 1, now=0.0, until=10.0) == [(1, 1)]
    for attempt in (1, 2, 3):
        assert db.run("A", "claim_unconditional", id=2, owner="A", now=0.0, lease_until=10.0) == [
            (2, attempt)
        ]
    assert db.claim("B", 3, now=0.0, until=10.0) == [(3, 1)]
    assert db.claim("B", 4, now=0.0, until=100.0) == [(4, 1)]
    db.begin("C")
    assert db.run("C", "lock_job_nowait", id=3) == [(3, "Processing")]  # e.g. a slow completion

    assert db.run("W", "select_stuck_jobs", now=20.0) == [
        (1, "A", 10.0, 1),
        (2, "A", 10.0, 3),
        (3, "B", 10.0, 1),
    ]
    assert db.run("W", "requeue_expired", now=20.0, max_attempts=3, limit=10) == [
        (1, "Pending", "A", 1),
        (2, "Dead", "A", 3),
    ]
    assert db.run("W", "select_stuck_jobs", now=20.0) == [(3, "B", 10.0, 1)]
    db.commit("C")
    assert db.run("W", "requeue_expired", now=21.0, max_attempts=3, limit=10) == [
        (3, "Pending", "B", 1)
    ]
    assert db.run("W", "requeue_expired", now=22.0, max_attempts=3, limit=10) == []
    assert db.jobs() == [
        job_row(1, "Pending", "A", 10.0, 1, heartbeat=0.0, error="lease expired"),
        job_row(2, "Dead", "A", 10.0, 3, heartbeat=0.0, error="lease expired"),
        job_row(3, "Pending", "B", 10.0, 1, heartbeat=0.0, error="lease expired"),
        job_row(4, "Processing", "B", 100.0, 1, heartbeat=0.0),
        job_row(5),
    ]
    assert db.run("W", "count_jobs_by_status") == [("Dead", 1), ("Pending", 3), ("Processing", 1)]


def test_requeue_takes_the_oldest_expiry_first(db):
    db.add_jobs(1, 2, 3)
    for job_id, until in [(1, 9.0), (2, 5.0), (3, 5.0)]:
        assert db.claim("A", job_id, now=0.0, until=until) == [(job_id, 1)]
    assert db.run("W", "requeue_expired", now=10.0, max_attempts=5, limit=1) == [
        (2, "Pending", "A", 1)
    ]
    assert db.run("W", "requeue_expired", now=10.0, max_attempts=5, limit=5) == [
        (1, "Pending", "A", 1),
        (3, "Pending", "A", 1),
    ]


def test_requeued_job_is_claimable_again(db):
    db.add_jobs(1)
    assert db.claim("A", 1, now=0.0, until=10.0) == [(1, 1)]
    assert db.run("W", "requeue_expired", now=11.0, max_attempts=5, limit=10) == [
        (1, "Pending", "A", 1)
    ]
    assert db.run("B", "select_candidates", now=11.0, take_expired=False, limit=5) == [
        (1, "Pending", "A", 10.0, 1)
    ]
    assert db.claim("B", 1, now=12.0, until=42.0) == [(1, 2)]
    assert db.jobs() == [
        job_row(1, "Processing", "B", 42.0, 2, heartbeat=12.0, error="lease expired")
    ]
