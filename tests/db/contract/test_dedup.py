"""Seed 2: the dedup marker's ON CONFLICT wait, purging markers, ledger ids, duplicate job ids."""

from __future__ import annotations

import pytest

from sim.db.base import Blocked
from sim.db.errors import UniqueViolationError

from .script import job_row, payload


@pytest.mark.parametrize("outcome", ["commit", "rollback"])
def test_on_conflict_waits_for_an_uncommitted_marker(db, outcome):
    db.begin("A")
    assert db.run("A", "insert_dedup_marker", event_id="e1", payload_hash="h1", now=1.0) == [
        ("e1",)
    ]
    assert db.run("B", "read_dedup_marker", event_id="e1") == []  # uncommitted: invisible, no wait
    assert db.run("B", "insert_dedup_marker", event_id="e1", payload_hash="h2", now=2.0) == Blocked(
        "B", "insert_dedup_marker", "A"
    )
    getattr(db, outcome)("A")
    if outcome == "commit":
        assert db.resume("B") == []  # a duplicate delivery: do not apply the effect again
        assert db.run("B", "read_dedup_marker", event_id="e1") == [("e1", "h1", 1.0)]
        assert db.markers() == [("e1", "h1", 1.0)]
    else:
        assert db.resume("B") == [("e1",)]  # the failed first delivery left the event eligible
        assert db.markers() == [("e1", "h2", 2.0)]


def test_marker_and_effect_roll_back_together(db):
    db.begin("A")
    assert db.run("A", "insert_dedup_marker", event_id="e1", payload_hash="h1", now=1.0) == [
        ("e1",)
    ]
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
    assert db.run("A", "dump_ledger") == [(1, 1, "e1", 100, "A", 1, 1.0)]  # own writes visible
    assert db.ledger() == []  # not to others
    db.rollback("A")
    assert db.markers() == [] and db.ledger() == []


def test_ledger_ids_are_never_rolled_back(db):
    entry = {"job_id": 1, "event_id": "e1", "amount_cents": 100, "attempt": 1, "now": 1.0}
    db.begin("A")
    assert db.run("A", "insert_ledger_entry", worker="A", **entry) == [(1,)]
    db.rollback("A")
    assert db.run("A", "insert_ledger_entry", worker="A", **entry) == [(2,)]
    db.begin("B")
    assert db.run("B", "insert_ledger_entry", worker="B", **entry) == [(3,)]
    assert db.run("C", "insert_ledger_entry", worker="C", **entry) == [(4,)]
    db.commit("B")
    assert db.ledger() == [
        (2, 1, "e1", 100, "A", 1, 1.0),
        (3, 1, "e1", 100, "B", 1, 1.0),
        (4, 1, "e1", 100, "C", 1, 1.0),
    ]


def test_purge_forgets_old_markers(db):
    for event_id, now in [("e1", 0.0), ("e2", 10.0), ("e3", 20.0)]:
        assert db.run("A", "insert_dedup_marker", event_id=event_id, payload_hash="h", now=now) == [
            (event_id,)
        ]
    assert db.run("W", "purge_dedup_markers", before=10.0) == [("e1",)]
    assert db.run("W", "purge_dedup_markers", before=20.000001) == [("e2",), ("e3",)]
    assert db.markers() == []
    # A redelivery after the retention passes the dedup check again: keep markers long enough.
    assert db.run("A", "insert_dedup_marker", event_id="e1", payload_hash="h", now=30.0) == [
        ("e1",)
    ]
    assert db.markers() == [("e1", "h", 30.0)]


@pytest.mark.parametrize("outcome", ["commit", "rollback"])
def test_duplicate_job_id_waits_then_fails_or_inserts(db, outcome):
    job = {"id": 1, "event_id": "e1", "payload": payload(1)}
    db.begin("A")
    assert db.run("A", "insert_job", now=0.0, **job) == []
    assert db.run("B", "insert_job", now=5.0, **job) == Blocked("B", "insert_job", "A")
    getattr(db, outcome)("A")
    if outcome == "commit":
        with pytest.raises(UniqueViolationError, match="insert_job") as err:
            db.resume("B")
        assert err.value.sqlstate == "23505"
        assert db.jobs() == [job_row(1)]
    else:
        assert db.resume("B") == []
        assert db.jobs() == [job_row(1, created=5.0)]
