"""PostgresBackend specifics: its own schema, lazy connections, never hanging the driver."""

from __future__ import annotations

import psycopg
import pytest
from psycopg import sql

import sim.db.postgres as postgres
from sim.db.errors import ClientCrashedError, DatabaseError
from sim.db.postgres import PostgresBackend, StatementStuckError

pytestmark = pytest.mark.postgres


@pytest.fixture
def admin(pg_dsn):
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        yield conn


def schemas(admin) -> set[str]:
    return {name for (name,) in admin.execute("SELECT nspname FROM pg_namespace")}


def sessions(admin, application_name: str) -> int:
    return admin.execute(
        "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s", (application_name,)
    ).fetchone()[0]


def test_schema_is_created_and_dropped(pg_dsn, admin):
    db = PostgresBackend(pg_dsn)
    assert db.schema.startswith("leaselab_") and db.schema in schemas(admin)
    tables = admin.execute(
        "SELECT tablename FROM pg_tables WHERE schemaname = %s ORDER BY 1", (db.schema,)
    ).fetchall()
    assert tables == [
        ("ledger",),
        ("payment_jobs",),
        ("processed_events",),
        ("worker_processes",),
    ]
    db.close()
    db.close()  # idempotent
    assert db.schema not in schemas(admin)


def test_keep_schema_and_a_quoted_name(pg_dsn, admin):
    name = 'Lease Lab "kept"'
    db = PostgresBackend(pg_dsn, schema=name, keep_schema=True)
    db.connect("A")
    db.execute("A", "insert_job", {"id": 1, "event_id": "e1", "payload": "{}", "now": 0.0})
    db.close()
    try:
        assert name in schemas(admin)
        with pytest.raises(DatabaseError, match="already exists"):
            PostgresBackend(pg_dsn, schema=name)
        count = sql.SQL("SELECT count(*) FROM {}.payment_jobs").format(sql.Identifier(name))
        assert admin.execute(count).fetchone()[0] == 1
    finally:
        admin.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(name)))


def test_backends_are_isolated(pg_dsn):
    one, two = PostgresBackend(pg_dsn), PostgresBackend(pg_dsn)
    try:
        for db in (one, two):
            db.connect("A")
        one.execute("A", "insert_job", {"id": 1, "event_id": "e1", "payload": "{}", "now": 0.0})
        assert two.execute("A", "dump_jobs", {}) == []
        assert one.execute("A", "count_jobs_by_status", {}) == [("Pending", 1)]
    finally:
        one.close()
        two.close()


def test_connections_are_lazy_and_closed(pg_dsn, admin):
    db = PostgresBackend(pg_dsn)
    client = f"lazy-{db.schema}"
    db.connect(client)
    assert sessions(admin, f"leaselab:{client}") == 0
    db.execute(client, "dump_jobs", {})
    assert sessions(admin, f"leaselab:{client}") == 1
    db.crash(client)
    assert sessions(admin, f"leaselab:{client}") == 0
    db.connect(client)
    db.begin(client)
    db.close()
    assert sessions(admin, f"leaselab:{client}") == 0


def test_a_lock_held_outside_the_run_times_out(pg_dsn, admin, monkeypatch):
    """A statement waiting on a session that is not one of the backend's clients cannot be
    resumed by the simulation: after the timeout it fails, naming the query, instead of hanging."""
    monkeypatch.setattr(postgres, "STATEMENT_TIMEOUT_S", 0.3)
    db = PostgresBackend(pg_dsn)
    try:
        db.connect("A")
        db.execute("A", "insert_job", {"id": 1, "event_id": "e1", "payload": "{}", "now": 0.0})
        with psycopg.connect(pg_dsn) as outsider:
            outsider.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(db.schema)))
            outsider.execute("SELECT id FROM payment_jobs WHERE id = 1 FOR UPDATE")
            with pytest.raises(
                StatementStuckError, match="client A: claim_unconditional neither finished"
            ):
                db.execute(
                    "A",
                    "claim_unconditional",
                    {"id": 1, "owner": "A", "now": 1.0, "lease_until": 31.0, "max_attempts": 25},
                )
            outsider.rollback()
        with pytest.raises(ClientCrashedError):
            db.execute("A", "dump_jobs", {})
    finally:
        db.close()
