"""Server selection, DSN redaction and one-line connection errors."""

from __future__ import annotations

import secrets

import psycopg
import pytest
from psycopg.conninfo import make_conninfo

from sim.db.errors import ServerUnavailableError
from sim.db.postgres import PostgresBackend
from sim.db.server import connection_error, embedded_pgdata, redact_dsn, resolve_dsn
from tests.db.postgres.fingerprint import create_role


def test_resolve_dsn_precedence(monkeypatch):
    monkeypatch.delenv("LEASELAB_DSN", raising=False)
    monkeypatch.delenv("DATABASE_URL", raising=False)
    assert resolve_dsn() is None
    monkeypatch.setenv("DATABASE_URL", "postgresql://d/db")
    assert resolve_dsn() == "postgresql://d/db"
    monkeypatch.setenv("LEASELAB_DSN", "postgresql://l/db")
    assert resolve_dsn() == "postgresql://l/db"
    assert resolve_dsn("host=x") == "host=x"


def test_embedded_pgdata_can_be_overridden(monkeypatch, tmp_path):
    monkeypatch.delenv("LEASELAB_PGDATA", raising=False)
    assert embedded_pgdata().parts[-2:] == ("leaselab", "pg18")
    monkeypatch.setenv("LEASELAB_PGDATA", str(tmp_path / "pg"))
    assert embedded_pgdata() == tmp_path / "pg"


@pytest.mark.parametrize(
    ("dsn", "redacted"),
    [
        ("postgresql://u:secret@127.0.0.1:1/db", "postgresql://u@127.0.0.1:1/db"),
        (
            "postgres://u:s%40cret@h1:5432,h2:5433/db?sslmode=require&password=secret",
            "postgres://u@h1:5432,h2:5433/db?sslmode=require",
        ),
        (
            "postgresql://postgres:@/postgres?host=/tmp/pg",
            "postgresql://postgres@/postgres?host=/tmp/pg",
        ),
        ("postgresql://u@h/db", "postgresql://u@h/db"),
        ("host=h user=u password=secret dbname=d", "host=h user=u dbname=d"),
        ("host=h password = 'se cret\\'s' dbname=d", "host=h dbname=d"),
        ("password=secret host=h", "host=h"),
    ],
)
def test_redact_dsn(dsn, redacted):
    assert redact_dsn(dsn) == redacted


def test_unreachable_server_is_one_clear_line():
    with pytest.raises(ServerUnavailableError) as err:
        PostgresBackend("postgresql://u:secret@127.0.0.1:1/db")
    message = str(err.value)
    assert "host 127.0.0.1 port 1 database db user u" in message
    assert "LEASELAB_DSN" in message
    assert "secret" not in message and "\n" not in message


def test_wrong_password_advice():
    exc = psycopg.OperationalError(
        'connection failed: connection to server at "10.0.0.5", port 5432 failed: '
        'FATAL:  password authentication failed for user "u"'
    )
    message = str(connection_error("postgresql://u:hunter2@10.0.0.5/db", exc))
    assert message == (
        "PostgreSQL at host 10.0.0.5 database db user u: password authentication failed for user "
        '"u"; '
        "check the user and password in LEASELAB_DSN"
    )


@pytest.mark.postgres
def test_missing_create_schema_privilege(pg_dsn):
    role = f"leaselab_noprivs_{secrets.token_hex(4)}"
    with psycopg.connect(pg_dsn, autocommit=True) as admin:
        create_role(admin, role, "LOGIN PASSWORD 'pw-secret'")  # marked: fingerprints leave it out
        try:
            with pytest.raises(ServerUnavailableError) as err:
                PostgresBackend(make_conninfo(pg_dsn, user=role, password="pw-secret"))
        finally:
            admin.execute(psycopg.sql.SQL("DROP ROLE {}").format(psycopg.sql.Identifier(role)))
    message = str(err.value)
    assert f"user {role}: cannot CREATE SCHEMA" in message
    assert "GRANT CREATE ON DATABASE" in message
    assert "pw-secret" not in message
