"""A crashed client: its transaction rolls back at once, its locks go, its statements are
refused."""

from __future__ import annotations

import pytest

from sim.db.base import Blocked
from sim.db.errors import ClientCrashedError

from .script import job_row


def test_crash_rolls_back_and_releases_locks(db):
    db.add_jobs(1)
    db.begin("A")
    assert db.claim("A", 1, now=1.0, until=31.0) == [(1, 1)]
    assert db.run(
        "A",
        "insert_ledger_entry",
        job_id=1,
        event_id="e1",
        amount_cents=100,
        worker="A",
        attempt=1,
        now=1.0,
    ) == [(1,)]
    assert db.claim("B", 1, now=2.0, until=32.0) == Blocked("B", "claim_conditional", "A")
    db.crash("A")
    assert not db.in_transaction("A")
    assert db.resume("B") == [(1, 1)]  # A's claim never happened
    with pytest.raises(ClientCrashedError, match="client A has crashed.*count_jobs_by_status"):
        db.run("A", "count_jobs_by_status")
    with pytest.raises(ClientCrashedError):
        db.begin("A")
    db.crash("A")  # crashing twice is harmless
    assert db.jobs() == [job_row(1, "Processing", "B", 32.0, 1, heartbeat=2.0)]
    assert db.ledger() == []
    db.connect("A")
    assert db.run("A", "count_jobs_by_status") == [("Processing", 1)]
    assert db.run(
        "A",
        "insert_ledger_entry",
        job_id=1,
        event_id="e1",
        amount_cents=100,
        worker="A",
        attempt=1,
        now=3.0,
    ) == [(2,)]


def test_crash_of_a_waiting_client_abandons_its_statement(db):
    db.add_jobs(1)
    db.begin("A")
    assert db.claim("A", 1, now=1.0, until=31.0) == [(1, 1)]
    db.begin("B")
    assert db.run("B", "insert_dedup_marker", event_id="e1", payload_hash="h", now=1.0) == [("e1",)]
    assert db.run(
        "B", "claim_unconditional", id=1, owner="B", now=1.0, lease_until=31.0
    ) == Blocked("B", "claim_unconditional", "A")
    db.crash("B")
    with pytest.raises(ClientCrashedError):
        db.resume("B")
    db.commit("A")
    assert db.run("C", "lock_job_nowait", id=1) == [(1, "Processing")]  # B holds nothing
    assert db.run("C", "insert_dedup_marker", event_id="e1", payload_hash="h", now=2.0) == [("e1",)]
    assert db.jobs() == [job_row(1, "Processing", "A", 31.0, 1, heartbeat=1.0)]


def test_crash_outside_a_transaction_loses_nothing_committed(db):
    db.add_jobs(1)
    assert db.claim("A", 1, now=1.0, until=31.0) == [(1, 1)]
    db.crash("A")
    db.crash("Z")  # a client that never connected: nothing to do
    assert db.jobs() == [job_row(1, "Processing", "A", 31.0, 1, heartbeat=1.0)]
