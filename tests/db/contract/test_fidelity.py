"""The statements behind issue #16 on both backends: the attempts cap on every claim path, retry
backoff, the read-then-write watcher's rescue, the worker-side deadline and graceful release."""

from __future__ import annotations

from .script import job_row


def _exhaust(db, job_id: int, cap: int) -> None:
    """Lease job `job_id` `cap` times (each lease expiring at once), leaving it Processing at the
    cap."""
    for attempt in range(1, cap + 1):
        assert db.run(
            "A",
            "claim_conditional",
            id=job_id,
            owner="A",
            now=float(attempt),
            lease_until=float(attempt),
            max_attempts=cap,
        ) == [(job_id, attempt)]


def test_no_claim_path_takes_a_job_out_of_attempts(db):
    db.add_jobs(1, 2)
    _exhaust(db, 1, 2)  # job 1: Processing, lease expired, attempts = 2 = the cap
    now = {"now": 10.0, "max_attempts": 2}
    assert db.run("B", "select_candidates", take_expired=True, limit=5, **now) == [
        (2, "Pending", None, None, 0)
    ]
    assert db.run("B", "claim_conditional", id=1, owner="B", lease_until=20.0, **now) == []
    assert db.run("B", "claim_unconditional", id=1, owner="B", lease_until=20.0, **now) == []
    db.begin("B")
    assert db.run("B", "lock_next_candidate", take_expired=True, **now) == [(2, 0)]
    db.rollback("B")
    assert db.run(
        "B", "claim_skip_locked", owner="B", lease_until=20.0, take_expired=True, **now
    ) == [(2, 1)]
    assert (
        db.run("B", "claim_skip_locked", owner="B", lease_until=20.0, take_expired=True, **now)
        == []
    )
    # a higher cap makes it claimable again: the cap is the caller's, as max_attempts is per queue
    assert db.run(
        "C", "claim_conditional", id=1, owner="C", now=11.0, lease_until=20.0, max_attempts=3
    ) == [(1, 3)]


def test_a_requeued_job_is_due_after_its_backoff(db):
    db.add_jobs(1)
    assert db.claim("A", 1, now=0.0, until=5.0) == [(1, 1)]
    assert db.claim("A", 1, now=6.0, until=8.0) == [(1, 2)]  # the claim took the expired lease
    # 500 ms x attempts^4 = 8 s after the requeue at 10 s
    assert db.run(
        "W", "requeue_expired", now=10.0, max_attempts=5, limit=5, retry_backoff=500_000
    ) == [(1, "Pending", "A", 2)]
    assert db.run("B", "select_candidates", now=17.999999, take_expired=False, limit=5) == []
    assert (
        db.run(
            "B", "claim_skip_locked", owner="B", now=17.999999, lease_until=30.0, take_expired=True
        )
        == []
    )
    assert db.run("B", "claim_conditional", id=1, owner="B", now=17.999999, lease_until=30.0) == []
    assert db.run("B", "select_candidates", now=18.0, take_expired=False, limit=5) == [
        (1, "Pending", "A", 8.0, 2)
    ]
    assert db.run("B", "claim_conditional", id=1, owner="B", now=18.0, lease_until=30.0) == [(1, 3)]


def test_rescue_by_id_overwrites_whatever_the_job_became(db):
    """The write of a read-then-write watcher: it re-checks nothing (River #1302)."""
    db.add_jobs(1, 2)
    assert db.claim("A", 1, now=0.0, until=5.0) == [(1, 1)]
    assert db.claim("A", 2, now=0.0, until=5.0) == [(2, 1)]
    assert db.run("W", "select_stuck_jobs", now=6.0) == [(1, "A", 5.0, 1), (2, "A", 5.0, 1)]
    assert db.run("A", "complete_unfenced", id=1, now=6.5) == [(1,)]
    assert db.run("W", "rescue_job", id=1, now=7.0, max_attempts=5, retry_backoff=0) == [
        (1, "Pending", "A", 1)
    ]
    assert db.run("W", "rescue_job", id=2, now=7.0, max_attempts=1, retry_backoff=0) == [
        (2, "Dead", "A", 1)
    ]
    assert db.run("W", "rescue_job", id=3, now=7.0, max_attempts=1, retry_backoff=0) == []
    assert db.jobs() == [
        job_row(1, "Pending", "A", 5.0, 1, heartbeat=0.0, completed=6.5, error="lease expired"),
        job_row(2, "Dead", "A", 5.0, 1, heartbeat=0.0, error="lease expired"),
    ]


def test_a_deadline_fails_only_the_owner_s_attempt(db):
    db.add_jobs(1, 2)
    assert db.claim("A", 1, now=0.0, until=900.0) == [(1, 1)]
    assert db.claim("A", 2, now=0.0, until=900.0) == [(2, 1)]
    fail = {"owner": "A", "attempt": 1, "now": 5.0, "retry_backoff": 1_000_000}
    assert db.run("B", "fail_job_fenced", id=1, **{**fail, "owner": "B"}, max_attempts=3) == []
    assert db.run("B", "fail_job_fenced", id=1, **{**fail, "attempt": 2}, max_attempts=3) == []
    assert db.run("B", "fail_job_fenced", id=1, **fail, max_attempts=3) == [(1, "Pending", 1)]
    assert db.run("B", "fail_job_fenced", id=2, **fail, max_attempts=1) == [(2, "Dead", 1)]
    assert (
        db.run("B", "fail_job_fenced", id=1, **fail, max_attempts=3) == []
    )  # no longer Processing
    assert db.claim("C", 1, now=5.9, until=900.0) == []  # due 1 s x 1^4 after the failure
    assert db.claim("C", 1, now=6.0, until=900.0) == [(1, 2)]
    assert [r[3] for r in db.jobs()] == ["Processing", "Dead"]
    assert [r[10] for r in db.jobs()] == ["deadline exceeded", "deadline exceeded"]


def test_a_graceful_release_gives_the_owner_s_job_back_at_once(db):
    db.add_jobs(1, 2)
    assert db.claim("A", 1, now=0.0, until=30.0) == [(1, 1)]
    assert db.claim("A", 2, now=0.0, until=30.0) == [(2, 1)]
    assert db.run("B", "release_job_fenced", id=1, owner="B", attempt=1, max_attempts=5) == []
    assert db.run("A", "release_job_fenced", id=1, owner="A", attempt=1, max_attempts=5) == [
        (1, "Pending", 1)
    ]
    assert db.run("A", "release_job_fenced", id=2, owner="A", attempt=1, max_attempts=1) == [
        (2, "Dead", 1)
    ]
    assert db.claim("B", 1, now=1.0, until=31.0) == [(1, 2)]
    assert db.jobs() == [
        job_row(1, "Processing", "B", 31.0, 2, heartbeat=1.0, error="released at shutdown"),
        job_row(2, "Dead", "A", 30.0, 1, heartbeat=0.0, error="released at shutdown"),
    ]


def test_a_claim_waiting_on_a_row_re_checks_the_cap(db):
    """EvalPlanQual: B's claim waited on A's transaction, which used the job's last attempt."""
    db.add_jobs(1)
    db.begin("A")
    assert db.run(
        "A", "claim_conditional", id=1, owner="A", now=0.0, lease_until=0.5, max_attempts=1
    ) == [(1, 1)]
    blocked = db.run(
        "B", "claim_unconditional", id=1, owner="B", now=1.0, lease_until=2.0, max_attempts=1
    )
    assert blocked.holder == "A"
    db.commit("A")
    assert db.resume("B") == []


def test_a_for_update_scan_skips_a_locked_row_out_of_attempts_without_waiting(db):
    """Found by the differential scripts: PostgreSQL filters on the row version the scan sees before
    it locks, so a Pending job at the cap that another transaction holds is passed over, not waited
    on."""
    db.add_jobs(1, 2)
    assert db.claim("A", 1, now=0.0, until=1.0) == [(1, 1)]
    assert db.run("W", "release_job_fenced", id=1, owner="A", attempt=1, max_attempts=5) == [
        (1, "Pending", 1)
    ]
    db.begin("C")
    assert db.run("C", "lock_job_nowait", id=1) == [(1, "Pending")]
    db.begin("B")
    assert db.run("B", "lock_next_candidate", now=2.0, take_expired=True, max_attempts=1) == [
        (2, 0)
    ]
    db.rollback("B")
    db.rollback("C")
