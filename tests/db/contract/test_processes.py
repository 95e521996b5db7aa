"""Process liveness statements: register_process (an upsert: a reused name takes the row over),
process_heartbeat (no row: pruned), prune_processes (stale rows deleted, the Processing jobs of
owners without a live row moved; locked rows skipped; a stall budget apart from the attempts)."""

from __future__ import annotations

import pytest

from sim.db.errors import ClientStateError
from sim.db.memory import MemoryBackend

from .script import Script, job_row

MICROS = 1_000_000


def _prune(db, now, *, stale=30.0, dead=False, max_attempts=25, max_stalls=1_000_000, limit=10):
    return db.run(
        "W",
        "prune_processes",
        now=now,
        stale_after=round(stale * MICROS),
        dead=dead,
        max_attempts=max_attempts,
        max_stalls=max_stalls,
        limit=limit,
    )


def test_register_beat_and_prune(db):
    db.add_jobs(1, 2, 3, 4)
    assert db.run("W", "register_process", owner="A", now=0.0) == [("A",)]
    assert db.run("W", "register_process", owner="B", now=0.0) == [("B",)]
    assert db.claim("A", 1, now=1.0, until=1e9) == [(1, 1)]
    assert db.claim("B", 2, now=1.0, until=1e9) == [(2, 1)]
    assert db.claim("C", 3, now=1.0, until=1e9) == [(3, 1)]  # C never registered
    assert db.run("W", "process_heartbeat", owner="B", now=20.0) == [("B",)]
    assert db.run("W", "process_heartbeat", owner="C", now=20.0) == []
    # at 35: A (beat at 0) is stale, B (20) is not; C has no row at all
    assert _prune(db, 35.0) == [(1, "Pending", "A", 1), (3, "Pending", "C", 1)]
    assert db.run("W", "process_heartbeat", owner="A", now=36.0) == []  # A was pruned
    assert db.run("W", "register_process", owner="A", now=36.0) == [("A",)]
    assert _prune(db, 40.0) == []
    assert db.jobs() == [
        job_row(1, "Pending", "A", 1e9, 1, heartbeat=1.0, error="process gone"),
        job_row(2, "Processing", "B", 1e9, 1, heartbeat=1.0),
        job_row(3, "Pending", "C", 1e9, 1, heartbeat=1.0, error="process gone"),
        job_row(4),
    ]


def test_a_reused_name_keeps_the_old_jobs_alive(db):
    db.add_jobs(1)
    assert db.run("W", "register_process", owner="A", now=0.0) == [("A",)]
    assert db.claim("A", 1, now=0.0, until=1e9) == [(1, 1)]
    # A dies; a new process registers under the same name: its row looks alive again
    assert db.run("W", "register_process", owner="A", now=50.0) == [("A",)]
    assert _prune(db, 60.0) == []
    assert db.jobs()[0][3] == "Processing"


def test_locked_rows_wait_for_the_next_prune_and_budgets_kill(db):
    db.add_jobs(1, 2, 3)
    assert db.run("W", "register_process", owner="A", now=0.0) == [("A",)]
    for job_id in (1, 2, 3):
        assert db.claim("A", job_id, now=0.0, until=1e9) == [(job_id, 1)]
    db.begin("C")
    assert db.run("C", "lock_job_nowait", id=2) == [(2, "Processing")]
    # job 1 over its stall budget of 0, job 3 out of attempts (1): both Dead; job 2 is locked
    assert _prune(db, 31.0, max_stalls=0, max_attempts=5, limit=1) == [(1, "Dead", "A", 1)]
    assert _prune(db, 31.0, max_attempts=1) == [(3, "Dead", "A", 1)]
    db.commit("C")
    assert _prune(db, 32.0, dead=True) == [(2, "Dead", "A", 1)]  # the row was deleted at 31
    errors = [(row[0], row[3], row[10]) for row in db.jobs()]
    assert errors == [
        (1, "Dead", "process gone"),
        (2, "Dead", "process gone"),
        (3, "Dead", "process gone"),
    ]


def test_the_simulated_database_writes_process_rows_in_autocommit_only():
    """The model never writes them in a transaction; the memory backend refuses to, rather than
    write rows it neither versions nor locks (PostgreSQL would)."""
    db = Script(MemoryBackend())
    db.begin("A")
    with pytest.raises(ClientStateError, match="autocommit only"):
        db.run("A", "register_process", owner="A", now=0.0)
