"""Every named query at least once, on one client in autocommit: rows and final tables."""

from __future__ import annotations

import re
from pathlib import Path

from sim.db.queries import load_queries

from .script import job_row


def test_every_query_once(db):
    db.add_jobs(1, 2, 3)
    assert db.run("A", "select_candidates", now=1.0, take_expired=True, limit=10) == [
        (1, "Pending", None, None, 0),
        (2, "Pending", None, None, 0),
        (3, "Pending", None, None, 0),
    ]
    assert db.run("A", "select_candidates", now=1.0, take_expired=True, limit=2) == [
        (1, "Pending", None, None, 0),
        (2, "Pending", None, None, 0),
    ]
    assert db.claim("A", 1, now=1.0, until=31.0) == [(1, 1)]
    assert db.run("A", "claim_unconditional", id=2, owner="A", now=1.0, lease_until=31.0) == [
        (2, 1)
    ]
    assert db.run(
        "B", "claim_skip_locked", owner="B", now=2.0, lease_until=32.0, take_expired=False
    ) == [(3, 1)]
    assert (
        db.run("B", "claim_skip_locked", owner="B", now=2.0, lease_until=32.0, take_expired=False)
        == []
    )
    assert db.run("A", "lock_next_candidate", now=5.0, take_expired=False) == []
    assert db.run("A", "lock_next_candidate", now=31.5, take_expired=True) == [(1, 1)]
    assert db.run("A", "lock_job_nowait", id=2) == [(2, "Processing")]
    assert db.run("A", "lock_job_nowait", id=99) == []
    assert db.run("A", "heartbeat", id=1, owner="A", attempt=1, now=10.0, lease_until=40.0) == [
        (1, 40.0)
    ]
    assert db.run("A", "complete_fenced", id=1, owner="A", attempt=1, now=11.0) == [(1,)]
    assert db.run("C", "complete_unfenced", id=2, now=12.0) == [(2,)]
    assert db.run("C", "complete_unfenced", id=99, now=12.0) == []
    assert db.run("W", "select_stuck_jobs", now=32.0) == []
    assert db.run("W", "select_stuck_jobs", now=50.0) == [(3, "B", 32.0, 1)]
    assert db.run(
        "B", "reject_job_fenced", id=3, owner="B", attempt=1, now=51.0, error="payload mismatch"
    ) == [(3,)]
    assert db.run("W", "count_jobs_by_status") == [("Completed", 2), ("Dead", 1)]

    assert db.run("A", "insert_dedup_marker", event_id="e1", payload_hash="h1", now=5.0) == [
        ("e1",)
    ]
    assert db.run("B", "insert_dedup_marker", event_id="e1", payload_hash="h2", now=6.0) == []
    assert db.run("B", "read_dedup_marker", event_id="e1") == [("e1", "h1", 5.0)]
    assert db.run("B", "read_dedup_marker", event_id="e9") == []
    assert db.run(
        "A",
        "insert_ledger_entry",
        job_id=1,
        event_id="e1",
        amount_cents=100,
        worker="A",
        attempt=1,
        now=6.5,
    ) == [(1,)]
    assert db.run("W", "purge_dedup_markers", before=5.0) == []

    assert db.jobs() == [
        job_row(1, "Completed", "A", 40.0, 1, heartbeat=10.0, completed=11.0),
        job_row(2, "Completed", "A", 31.0, 1, heartbeat=1.0, completed=12.0),
        job_row(3, "Dead", "B", 32.0, 1, heartbeat=2.0, completed=51.0, error="payload mismatch"),
    ]
    assert db.markers() == [("e1", "h1", 5.0)]
    assert db.ledger() == [(1, 1, "e1", 100, "A", 1, 6.5)]


def test_times_keep_microseconds(db):
    """Simulated seconds round-trip through timestamptz at microsecond resolution."""
    db.add_jobs(1, now=0.1234567)
    assert db.claim("A", 1, now=1e-6, until=86400.000001) == [(1, 1)]
    assert db.jobs() == [
        job_row(1, "Processing", "A", 86400.000001, 1, heartbeat=1e-6, created=0.123457)
    ]


def test_every_named_query_is_exercised_by_the_contract_suite():
    sources = "".join(p.read_text() for p in Path(__file__).parent.glob("*.py"))
    used = set(re.findall(r'"(\w+)"', sources))
    assert set(load_queries()) - used == set()
