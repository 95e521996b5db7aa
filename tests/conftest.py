"""Shared fixtures: the PostgreSQL server of the session and a fresh backend of each kind.

Postgres tests never skip: without LEASELAB_DSN the embedded server is started, and if that
fails the tests fail with its error.
"""

from __future__ import annotations

import os

import pytest

from sim.db.memory import MemoryBackend
from sim.db.postgres import PostgresBackend
from sim.db.server import embedded_server


@pytest.fixture(scope="session")
def pg_dsn() -> str:
    """LEASELAB_DSN if set, else the embedded server (started once per session)."""
    return os.environ.get("LEASELAB_DSN") or embedded_server().get_uri()


@pytest.fixture(params=["memory", pytest.param("postgres", marks=pytest.mark.postgres)])
def backend(request):
    """A fresh backend: a new MemoryBackend, or a PostgresBackend in a new schema."""
    if request.param == "memory":
        db = MemoryBackend()
    else:
        db = PostgresBackend(request.getfixturevalue("pg_dsn"))
    yield db
    db.close()
