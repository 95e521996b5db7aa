"""The two-phase stall check (reclaim_stalled): a job is reclaimed only if the previous pass marked
it and its lease is still expired; locked rows are skipped and keep their mark; the stall budget
(max_stalls) is counted apart from the attempts (BullMQ's maxStalledCount)."""

from __future__ import annotations

from .script import job_row


def _pass(db, now, *, max_stalls=1, max_attempts=25, limit=10):
    return db.run(
        "W",
        "reclaim_stalled",
        now=now,
        max_attempts=max_attempts,
        max_stalls=max_stalls,
        limit=limit,
    )


def test_a_job_is_reclaimed_on_the_pass_after_the_one_that_marked_it(db):
    db.add_jobs(1, 2, 3, 4, 5)
    assert db.claim("A", 1, now=0.0, until=10.0) == [(1, 1)]
    assert db.claim("B", 2, now=0.0, until=10.0) == [(2, 1)]
    assert db.claim("A", 3, now=0.0, until=100.0) == [(3, 1)]
    assert _pass(db, 5.0) == []  # nothing was marked yet: this pass marks 1, 2 and 3
    assert db.claim("A", 4, now=6.0, until=8.0) == [(4, 1)]  # claimed after the mark
    db.begin("C")
    assert db.run("C", "lock_job_nowait", id=2) == [(2, "Processing")]  # a completion under way
    # 1 was marked and has expired; 2 is locked (skipped, keeps its mark); 4 expired unmarked
    assert _pass(db, 20.0) == [(1, "Pending", "A", 1)]
    db.commit("C")
    assert db.claim("B", 1, now=21.0, until=25.0) == [(1, 2)]  # taken again, not marked yet
    assert _pass(db, 30.0) == [(2, "Pending", "B", 1), (4, "Pending", "A", 1)]
    # 1's second stall exceeds the budget of one: Dead, though it used 2 of its 25 attempts
    assert _pass(db, 40.0) == [(1, "Dead", "B", 2)]
    assert _pass(db, 50.0) == []
    assert db.jobs() == [
        job_row(
            1, "Dead", "B", 25.0, 2, heartbeat=21.0, error="stalled more than max_stalls times"
        ),
        job_row(2, "Pending", "B", 10.0, 1, heartbeat=0.0, error="stalled"),
        job_row(3, "Processing", "A", 100.0, 1, heartbeat=0.0),
        job_row(4, "Pending", "A", 8.0, 1, heartbeat=6.0, error="stalled"),
        job_row(5),
    ]


def test_a_renewed_or_completed_job_is_not_reclaimed_and_the_cap_still_holds(db):
    db.add_jobs(1, 2, 3)
    for job_id in (1, 2, 3):
        assert db.claim("A", job_id, now=0.0, until=10.0) == [(job_id, 1)]
    assert _pass(db, 5.0, max_stalls=0) == []
    hb = dict(owner="A", attempt=1, now=8.0, lease_until=18.0)
    assert db.run("A", "heartbeat", id=1, **hb) == [(1, 18.0)]  # renewed: not expired at 15
    assert db.run("A", "complete_fenced", id=2, owner="A", attempt=1, now=9.0) == [(2,)]
    # max_stalls = 0: the first stall kills; max_attempts = 1 would too
    assert _pass(db, 15.0, max_stalls=0) == [(3, "Dead", "A", 1)]
    assert _pass(db, 30.0, max_stalls=5, max_attempts=1) == [(1, "Dead", "A", 1)]
    statuses = [(row[0], row[3], row[10]) for row in db.jobs()]
    assert statuses == [
        (1, "Dead", "stalled"),
        (2, "Completed", None),
        (3, "Dead", "stalled more than max_stalls times"),
    ]


def test_the_limit_takes_the_oldest_expiry_first_and_the_rest_stay_marked(db):
    db.add_jobs(1, 2, 3)
    for job_id, until in [(1, 9.0), (2, 5.0), (3, 7.0)]:
        assert db.claim("A", job_id, now=0.0, until=until) == [(job_id, 1)]
    assert _pass(db, 1.0) == []
    assert _pass(db, 10.0, limit=1) == [(2, "Pending", "A", 1)]
    assert _pass(db, 10.0, limit=5) == [(1, "Pending", "A", 1), (3, "Pending", "A", 1)]
