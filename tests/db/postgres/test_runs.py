"""Whole runs on PostgresBackend: their schema is gone afterwards, whatever ended the run; crashes
kill real server processes; a waiter paused while its holder ended never outlives the backend."""

from __future__ import annotations

import pytest

import sim
import sim.runner
from sim.cli.main import main
from sim.db.base import Blocked
from sim.db.postgres import PostgresBackend

from .conftest import alive, schema_exists

pytestmark = pytest.mark.postgres


@pytest.fixture
def made(monkeypatch):
    """The PostgresBackends sim.run creates, and the server pids of their clients."""
    backends, pids = [], []
    make_backend = sim.runner.make_backend
    open_client = PostgresBackend._open

    def recording_make_backend(*args, **kwargs):
        backends.append(make_backend(*args, **kwargs))
        return backends[-1]

    def recording_open(self, client, state):
        open_client(self, client, state)
        pids.append(state.pid)

    monkeypatch.setattr(sim.runner, "make_backend", recording_make_backend)
    monkeypatch.setattr(PostgresBackend, "_open", recording_open)
    return backends, pids


def interrupt_midway(monkeypatch, error: BaseException):
    def half_then_fail(world, progress=None):
        world.env.run(until=world.scenario.horizon / 2)
        raise error

    monkeypatch.setattr(sim.runner, "run_to_horizon", half_then_fail)


def test_a_run_leaves_nothing_behind(pg_dsn, admin, made):
    backends, pids = made
    run = sim.run("crash-recovery", backend="postgres", dsn=pg_dsn, horizon=900.0)
    assert run.backend == "postgres" and run.summary["completed"] > 0
    assert not schema_exists(admin, backends[0].schema)
    assert len(pids) >= 4 and not alive(admin, pids)


@pytest.mark.parametrize("error", [RuntimeError("boom"), KeyboardInterrupt()])
def test_an_error_or_ctrl_c_midway_still_drops_the_schema(pg_dsn, admin, made, monkeypatch, error):
    backends, pids = made
    interrupt_midway(monkeypatch, error)
    with pytest.raises(type(error)):
        sim.run(
            "read-then-write-race",
            backend="postgres",
            dsn=pg_dsn,
            **{"policy.claim": "select_for_update"},
        )
    assert not schema_exists(admin, backends[0].schema)
    assert pids and not alive(admin, pids)


def test_ctrl_c_in_the_cli_exits_130_and_drops_the_schema(pg_dsn, admin, made, monkeypatch, capsys):
    backends, _ = made
    interrupt_midway(monkeypatch, KeyboardInterrupt())
    assert (
        main(["run", "baseline", "--backend", "postgres", "--dsn", pg_dsn, "--set", "horizon=60"])
        == 130
    )
    assert "interrupted" in capsys.readouterr().err
    assert not schema_exists(admin, backends[0].schema)


def test_crashes_kill_real_server_processes(pg_dsn, admin, made):
    backends, _ = made
    run = sim.run("crash-recovery", backend="postgres", dsn=pg_dsn, horizon=1800.0)
    crashes = int((run.events.kind == "crash").sum())
    killed = [pid for client, pid in backends[0].terminated if client.startswith("w")]
    assert crashes >= 2 and len(killed) >= crashes  # each crash killed the worker's connection(s)
    assert not alive(admin, killed)


def test_paused_waiters_are_let_go_when_the_backend_closes(pg_dsn, admin):
    db = PostgresBackend(pg_dsn)
    for client in ("A", "B", "C", "W"):
        db.connect(client)
    db.execute("W", "insert_job", {"id": 1, "event_id": "e1", "payload": "{}", "now": 0.0})
    db.begin("A")
    claim = {"id": 1, "now": 1.0, "lease_until": 31.0, "max_attempts": 25}
    assert db.execute("A", "claim_unconditional", {**claim, "owner": "A"}) == [(1, 1)]
    assert db.execute("B", "claim_unconditional", {**claim, "owner": "B"}) == Blocked(
        "B", "claim_unconditional", "A"
    )
    assert db.execute("C", "claim_unconditional", {**claim, "owner": "C"}) == Blocked(
        "C", "claim_unconditional", "A"
    )
    assert [w[:3] for w in db.lock_waits] == [
        ("B", "claim_unconditional", "A"),
        ("C", "claim_unconditional", "A"),
    ]
    waiters = [db._clients[c].pid for c in ("B", "C")]
    db.commit("A")  # B and C are paused now, until resumed: here, never
    if db.pauses_waiters:
        assert [_process_state(pid) for pid in waiters] == ["T", "T"], [
            (c, s.frozen, s.signals) for c, s in db._clients.items()
        ]
    db.close()
    assert not schema_exists(admin, db.schema)
    assert not alive(admin, waiters)


def test_waiters_resume_in_the_order_they_began_to_wait(pg_dsn):
    """However the server would wake them, B (first in line) gets the row before C."""
    db = PostgresBackend(pg_dsn)
    try:
        for client in ("A", "B", "C", "W"):
            db.connect(client)
        db.execute("W", "insert_job", {"id": 1, "event_id": "e1", "payload": "{}", "now": 0.0})
        for client in ("A", "B", "C"):
            db.begin(client)
        claim = {"id": 1, "now": 1.0, "lease_until": 31.0, "max_attempts": 25}
        assert db.execute("A", "claim_unconditional", {**claim, "owner": "A"}) == [(1, 1)]
        assert isinstance(db.execute("B", "claim_unconditional", {**claim, "owner": "B"}), Blocked)
        assert isinstance(db.execute("C", "claim_unconditional", {**claim, "owner": "C"}), Blocked)
        db.commit("A")
        assert db.resume("B") == [(1, 2)]
        assert db.resume("C") == Blocked("C", "claim_unconditional", "B")
        db.commit("B")
        assert db.resume("C") == [(1, 3)]
        db.commit("C")
    finally:
        db.close()


def _process_state(pid: int) -> str:
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0]


def test_a_statement_queued_behind_a_paused_waiter_is_not_stuck(pg_dsn, monkeypatch):
    """Found (a 60 s StatementStuckError in a generated run): H locks job 1 FOR UPDATE, W queues
    on it; H rolls back, and before W is resumed X locks the row and F wants it too. F queues
    on the row behind W, which PostgreSQL had granted the row's tuple lock while W was paused,
    so pg_blocking_pids(F) named only W, which waited for nothing. Fixed in PostgresBackend: a
    paused waiter at the head of a row's queue stands for its holder (here, as its holder has
    ended, it is let go at once), and DbSession resumes waiters the instant their holder ends."""
    import sim.db.postgres as postgres

    monkeypatch.setattr(postgres, "STATEMENT_TIMEOUT_S", 5.0)
    db = PostgresBackend(pg_dsn)
    try:
        for client in "HWXF":
            db.connect(client)
        db.execute("X", "insert_job", {"id": 1, "event_id": "e1", "payload": "{}", "now": 0.0})
        db.begin("H")
        assert db.execute(
            "H", "lock_next_candidate", {"now": 1.0, "take_expired": False, "max_attempts": 25}
        ) == [(1, 0)]
        db.begin("W")
        assert db.execute(
            "W", "lock_next_candidate", {"now": 1.0, "take_expired": False, "max_attempts": 25}
        ) == Blocked("W", "lock_next_candidate", "H")
        db.rollback("H")
        db.begin("X")
        assert db.execute("X", "lock_job_nowait", {"id": 1}) == [(1, "Pending")]
        claim = {"id": 1, "owner": "F", "now": 2.0, "lease_until": 9.0, "max_attempts": 25}
        assert db.execute("F", "claim_unconditional", claim) == Blocked(
            "F", "claim_unconditional", "X"
        )
        assert db.resume("W") == Blocked("W", "lock_next_candidate", "X")
        db.commit("X")
        assert db.resume("W") == [(1, 0)]  # first in line for the row, in PostgreSQL
        assert db.resume("F") == Blocked("F", "claim_unconditional", "W")
        db.commit("W")
        assert db.resume("F") == [(1, 1)]
    finally:
        db.close()
