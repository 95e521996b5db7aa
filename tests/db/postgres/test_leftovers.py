"""Death of a run leaves nothing for good (sim.db.leftovers, sim.support.interrupts): SIGTERM cleans
up like Ctrl-C; after SIGKILL the next start removes the dead run's schema and role (ending its
server processes, even paused ones), and says what it removed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from sim.cli.main import main
from sim.db import leftovers
from sim.db.processes import process_state

# server_wide: cleanups see (and remove) every dead run's schema and role on the server
pytestmark = [pytest.mark.postgres, pytest.mark.server_wide]

ROOT = Path(__file__).resolve().parents[3]
SEED = ROOT / "examples" / "queues" / "seed"
LONG_RUN = ["--set", "horizon=100000", "--set", "workload.jobs=100000", "--set", "workload.rate=20"]


def marked_by(admin, pid: int) -> list[tuple[str, str]]:
    """(kind, name) of the schemas and roles marked as made by process `pid`."""
    return sorted(
        (kind.lower(), name)
        for kind, name, mark in leftovers.marks(admin)
        if (mark or {}).get("pid") == pid
    )


def start(pg_dsn, *argv) -> subprocess.Popen:
    env = {**os.environ, "LEASELAB_DSN": pg_dsn}
    return subprocess.Popen(
        [sys.executable, "-m", "sim", *argv],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


def await_marks(admin, proc, timeout: float = 60) -> list[tuple[str, str]]:
    """The schema and role of the run of `proc`, once it has enqueued jobs (the check of the queue
    before it had a sandbox of its own, dropped already)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = marked_by(admin, proc.pid)
        for kind, name in found:
            busy = (
                kind == "schema"
                and admin.execute(
                    "SELECT count(*) FROM pg_class WHERE relname = 'payment_jobs' "
                    "AND relnamespace = (SELECT oid FROM pg_namespace WHERE nspname = %s)",
                    (name,),
                ).fetchone()[0]
            )
            if (
                busy
                and admin.execute(
                    sql.SQL("SELECT count(*) FROM {}.payment_jobs").format(sql.Identifier(name))
                ).fetchone()[0]
            ):
                return [(k, n) for k, n in found if n == name]
        assert proc.poll() is None, proc.stderr.read()
        time.sleep(0.05)
    raise AssertionError(f"the run made nothing marked within {timeout} s")


@pytest.fixture
def fresh_cleanup(monkeypatch):
    """This process cleans up again at its next start (it does so once per server)."""
    monkeypatch.setattr(leftovers, "_cleaned", set())


@pytest.mark.timeout(180)
def test_sigterm_cleans_up_like_ctrl_c(pg_dsn, admin):
    proc = start(pg_dsn, "run", "gc-pause-zombie", "--sql", str(SEED), *LONG_RUN)
    made = await_marks(admin, proc)
    assert [kind for kind, _ in made] == ["role", "schema"]
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 143 and err.strip().splitlines()[-1] == "terminated", err
    assert marked_by(admin, proc.pid) == []
    assert admin.execute(
        "SELECT count(*) FROM pg_stat_activity WHERE usename = %s", (made[0][1],)
    ).fetchone() == (0,)


@pytest.mark.timeout(180)
def test_after_sigkill_the_next_start_removes_the_schema_and_role(
    pg_dsn, admin, capsys, fresh_cleanup
):
    proc = start(pg_dsn, "run", "gc-pause-zombie", "--sql", str(SEED), *LONG_RUN)
    made = await_marks(admin, proc)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert marked_by(admin, proc.pid) == made  # what SIGKILL leaves
    name = made[0][1]
    assert (
        main(["run", "baseline", "--backend", "postgres", "--dsn", pg_dsn, "--set", "horizon=5"])
        == 0
    )
    err = capsys.readouterr().err
    assert (
        f"warning: cleaned up after runs that died: removed schema and role {name} "
        f"(pid {proc.pid} has exited)" in err
    ), err
    assert marked_by(admin, proc.pid) == []


def test_a_dead_runs_paused_server_process_is_woken_and_ended(pg_dsn, admin, fresh_cleanup):
    """A driver killed while it held a waiter paused (SIGSTOP) left a stopped server process that
    holds locks on its tables: the next start continues it, ends it, then drops the schema."""
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    pid = int(dead.stdout)
    mark = {**leftovers.owner(), "pid": pid}
    schema = "leaselab_deadbeef0001"
    admin.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
    admin.execute(sql.SQL("CREATE TABLE {}.t (x int)").format(sql.Identifier(schema)))
    admin.execute(
        sql.SQL("COMMENT ON SCHEMA {} IS {}").format(
            sql.Identifier(schema), sql.Literal(json.dumps(mark))
        )
    )
    holder = psycopg.connect(pg_dsn)
    holder.execute(sql.SQL("LOCK TABLE {}.t").format(sql.Identifier(schema)))
    backend = holder.info.backend_pid
    local = leftovers.may_signal(admin, admin.info.backend_pid)
    if local:
        os.kill(backend, signal.SIGSTOP)
    try:
        removed = leftovers.clean_server(admin)
        assert removed == [f"schema {schema} (pid {pid} has exited)"]
        assert admin.execute(
            "SELECT count(*) FROM pg_namespace WHERE nspname = %s", (schema,)
        ).fetchone() == (0,)
        assert admin.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE pid = %s", (backend,)
        ).fetchone() == (0,)
    finally:
        if local and process_state(backend) == "T":
            os.kill(backend, signal.SIGCONT)
        holder.close()


def test_kept_schemas_and_live_runs_are_left_alone(pg_dsn, admin, fresh_cleanup, tmp_path):
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    kept = {**leftovers.owner(), "pid": int(dead.stdout), "kept": True}
    alive = leftovers.owner()  # this process
    elsewhere = {**leftovers.owner(), "pid": int(dead.stdout), "host": "another-machine"}
    names = {
        "leaselab_kept00000001": kept,
        "leaselab_alive0000001": alive,
        "leaselab_other0000001": elsewhere,
    }
    for name, mark in names.items():
        admin.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(name)))
        admin.execute(
            sql.SQL("COMMENT ON SCHEMA {} IS {}").format(
                sql.Identifier(name), sql.Literal(json.dumps(mark))
            )
        )
    try:
        assert leftovers.clean_server(admin) == []
    finally:
        for name in names:
            admin.execute(sql.SQL("DROP SCHEMA {}").format(sql.Identifier(name)))


def test_dead_live_folders_are_removed(tmp_path):
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    gone = tmp_path / f"{leftovers.LIVE_FOLDER_PREFIX}gone"
    mine = tmp_path / f"{leftovers.LIVE_FOLDER_PREFIX}mine"
    unmarked = tmp_path / f"{leftovers.LIVE_FOLDER_PREFIX}unmarked"
    for folder in (gone, mine, unmarked):
        folder.mkdir()
    leftovers.mark_folder(mine)
    (gone / leftovers.OWNER_FILE).write_text(
        json.dumps({**leftovers.owner(), "pid": int(dead.stdout)})
    )
    assert leftovers.clean_temp_folders(tmp_path) == [
        f"folder {gone} (pid {dead.stdout.strip()} has exited)"
    ]
    assert not gone.exists() and mine.exists() and unmarked.exists()


def test_close_releases_on_a_fresh_connection_when_the_monitor_is_lost(pg_dsn, admin):
    """A Ctrl-C's cancel can close the monitor connection (psycopg closes it when the cancel
    does not finish) or land on its next statement: the run's schema and role still go."""
    from sim.db.postgres import PostgresBackend
    from sim.db.queue.directory import load_queue

    db = PostgresBackend(pg_dsn, queue=load_queue(SEED))
    role, schema = db.sandbox.role, db.schema
    db.connect("w0")
    db._monitor.close()
    db.close()
    assert admin.execute(
        "SELECT count(*) FROM pg_namespace WHERE nspname = %s", (schema,)
    ).fetchone() == (0,)
    assert admin.execute(
        "SELECT count(*) FROM pg_roles WHERE rolname = %s", (role,)
    ).fetchone() == (0,)
