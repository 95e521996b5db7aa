"""The memory backend implements exactly one method per named query, with the same name."""

from __future__ import annotations

from sim.db.base import Backend
from sim.db.memory import MemoryBackend
from sim.db.queries import load_queries, named_blocks


def test_memory_methods_are_the_named_queries():
    protocol = {
        name
        for name, value in vars(Backend).items()
        if callable(value) and not name.startswith("_")
    }
    methods = {
        name
        for name in dir(MemoryBackend)
        if not name.startswith("_") and callable(getattr(MemoryBackend, name))
    }
    assert protocol == {
        "connect",
        "execute",
        "resume",
        "begin",
        "commit",
        "rollback",
        "crash",
        "in_transaction",
        "close",
    }
    assert methods - protocol == set(load_queries())


def test_plain_selects_are_the_read_only_queries():
    read_only = {name for name, query in load_queries().items() if query.read_only}
    assert read_only == {
        "select_candidates",
        "select_stuck_jobs",
        "read_dedup_marker",
        "count_jobs_by_status",
        "dump_jobs",
        "dump_processed_events",
        "dump_ledger",
    }


def test_autocommit_select_leaves_no_trace_and_sees_only_committed_rows():
    db = MemoryBackend()
    db.connect("a")
    db.connect("b")
    db.execute("a", "insert_job", {"id": 1, "event_id": "e1", "payload": "{}", "now": 0.0})
    db.begin("b")
    db.execute("b", "insert_job", {"id": 2, "event_id": "e2", "payload": "{}", "now": 0.0})
    rows = db.execute(
        "a", "select_candidates", {"now": 1.0, "take_expired": True, "max_attempts": 25, "limit": 5}
    )
    assert [r[0] for r in rows] == [1]  # b's uncommitted insert is invisible, and nothing waited
    assert not db.in_transaction("a") and db.row_locks.keys() == {2}
    db.commit("b")
    rows = db.execute(
        "a", "select_candidates", {"now": 1.0, "take_expired": True, "max_attempts": 25, "limit": 5}
    )
    assert [r[0] for r in rows] == [1, 2]


def test_one_splitter_reads_the_blocks_of_both_queries_files():
    """sql/queries.sql and a user's queries.sql are cut into `-- name:` blocks by the same code."""
    text = "-- a header\n-- name: a\n-- first\nSELECT 1\n\n-- name: b\nSELECT 2;\n"
    assert named_blocks(text) == [
        (1, ["-- name: a", "-- first", "SELECT 1", ""]),
        (5, ["-- name: b", "SELECT 2;"]),
    ]
    assert named_blocks("SELECT 1;\n") == []
