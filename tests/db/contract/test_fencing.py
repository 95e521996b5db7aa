"""Owner + attempt fencing of heartbeat, completion and rejection; the unfenced zombie write."""

from __future__ import annotations

from .script import job_row


def fenced(db, client, query, job_id, owner, attempt, now, **extra):
    return db.run(client, query, id=job_id, owner=owner, attempt=attempt, now=now, **extra)


def test_fencing_refuses_non_owners_and_stale_attempts(db):
    db.add_jobs(1, 2)
    assert db.claim("A", 1, now=0.0, until=30.0) == [(1, 1)]
    assert fenced(db, "B", "heartbeat", 1, "B", 1, now=5.0, lease_until=35.0) == []  # not the owner
    assert fenced(db, "A", "heartbeat", 1, "A", 1, now=10.0, lease_until=40.0) == [(1, 40.0)]
    # A pauses past its lease; B takes the job over (attempt 2).
    assert db.claim("B", 1, now=41.0, until=71.0) == [(1, 2)]
    assert fenced(db, "A", "heartbeat", 1, "A", 1, now=42.0, lease_until=72.0) == []
    assert fenced(db, "A", "complete_fenced", 1, "A", 1, now=43.0) == []
    assert fenced(db, "A", "reject_job_fenced", 1, "A", 1, now=43.0, error="zombie") == []
    assert (
        fenced(db, "B", "complete_fenced", 1, "B", 1, now=44.0) == []
    )  # right owner, stale attempt
    assert fenced(db, "B", "complete_fenced", 1, "B", 2, now=45.0) == [(1,)]
    assert fenced(db, "B", "complete_fenced", 1, "B", 2, now=46.0) == []  # no longer Processing
    assert fenced(db, "A", "heartbeat", 2, "A", 0, now=46.0, lease_until=76.0) == []  # Pending job

    # The same owner re-claiming: its own earlier attempt is stale too.
    assert db.claim("A", 2, now=50.0, until=60.0) == [(2, 1)]
    assert db.claim("A", 2, now=61.0, until=91.0) == [(2, 2)]
    assert fenced(db, "A", "complete_fenced", 2, "A", 1, now=62.0) == []
    assert fenced(db, "A", "reject_job_fenced", 2, "A", 2, now=63.0, error="payload mismatch") == [
        (2,)
    ]
    assert db.jobs() == [
        job_row(1, "Completed", "B", 71.0, 2, heartbeat=41.0, completed=45.0),
        job_row(2, "Dead", "A", 91.0, 2, heartbeat=61.0, completed=63.0, error="payload mismatch"),
    ]


def test_unfenced_completion_lets_a_zombie_through(db):
    db.add_jobs(1)
    assert db.claim("A", 1, now=0.0, until=30.0) == [(1, 1)]
    assert db.claim("B", 1, now=31.0, until=61.0) == [(1, 2)]
    assert db.run("A", "complete_unfenced", id=1, now=32.0) == [(1,)]  # A no longer owns it
    assert db.jobs() == [job_row(1, "Completed", "B", 61.0, 2, heartbeat=31.0, completed=32.0)]
