"""The batch claim (claim_batch, policy.prefetch): up to `limit` of the oldest claimable jobs in
one statement, every lease from the same now; rows other transactions hold locked are skipped and
do not count against the limit; the attempts cap and take_expired hold as in claim_skip_locked."""

from __future__ import annotations

from .script import job_row


def _batch(db, client, now, *, limit, take_expired=False, max_attempts=25):
    return db.run(
        client,
        "claim_batch",
        owner=client,
        now=now,
        lease_until=now + 30.0,
        take_expired=take_expired,
        max_attempts=max_attempts,
        limit=limit,
    )


def test_a_batch_takes_the_oldest_claimable_jobs_skipping_locked_rows(db):
    db.add_jobs(1, 2, 3, 4, 5, 6)
    assert db.claim("A", 2, now=0.0, until=10.0) == [(2, 1)]
    db.begin("C")
    assert db.run("C", "lock_job_nowait", id=4) == [(4, "Pending")]
    assert _batch(db, "B", 1.0, limit=2) == [(1, 1), (3, 1)]  # 2 is leased, 4 locked
    assert _batch(db, "B", 2.0, limit=5) == [(5, 1), (6, 1)]
    db.commit("C")
    assert _batch(db, "A", 11.0, limit=10) == [(4, 1)]  # 2 expired, but take_expired is off
    assert _batch(db, "A", 11.0, limit=10, take_expired=True) == [(2, 2)]
    # every lease has ended by 100; job 2 has used its 2 attempts
    assert _batch(db, "B", 100.0, limit=3, take_expired=True, max_attempts=2) == [
        (1, 2),
        (3, 2),
        (4, 2),
    ]
    assert db.jobs() == [
        job_row(1, "Processing", "B", 130.0, 2, heartbeat=100.0),
        job_row(2, "Processing", "A", 41.0, 2, heartbeat=11.0),
        job_row(3, "Processing", "B", 130.0, 2, heartbeat=100.0),
        job_row(4, "Processing", "B", 130.0, 2, heartbeat=100.0),
        job_row(5, "Processing", "B", 32.0, 1, heartbeat=2.0),
        job_row(6, "Processing", "B", 32.0, 1, heartbeat=2.0),
    ]


def test_a_batch_in_an_open_transaction_holds_its_rows_until_it_ends(db):
    db.add_jobs(1, 2, 3, 4)
    db.begin("B")
    assert _batch(db, "B", 1.0, limit=2) == [(1, 1), (2, 1)]
    assert _batch(db, "A", 1.0, limit=2) == [(3, 1), (4, 1)]  # never waits: skips B's rows
    assert _batch(db, "C", 1.0, limit=2) == []
    db.rollback("B")
    assert _batch(db, "C", 2.0, limit=5) == [(1, 1), (2, 1)]
    assert [(row[0], row[4], row[6]) for row in db.jobs()] == [
        (1, "C", 1),
        (2, "C", 1),
        (3, "A", 1),
        (4, "A", 1),
    ]
