"""Fixtures of the Postgres tests: a backend the test drives through sim.run and then inspects."""

from __future__ import annotations

import psycopg
import pytest

from sim.db.postgres import PostgresBackend


@pytest.fixture
def pg(pg_dsn):
    """A PostgresBackend for one test; sim.run leaves a backend it was given open."""
    db = PostgresBackend(pg_dsn)
    yield db
    db.close()


@pytest.fixture
def admin(pg_dsn):
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        yield conn


def schema_exists(admin, name: str) -> bool:
    return (
        admin.execute("SELECT count(*) FROM pg_namespace WHERE nspname = %s", (name,)).fetchone()[0]
        == 1
    )


def alive(admin, pids) -> set[int]:
    rows = admin.execute(
        "SELECT pid FROM pg_stat_activity WHERE pid = ANY(%s)", (list(pids),)
    ).fetchall()
    return {pid for (pid,) in rows}
