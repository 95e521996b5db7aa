"""SIGKILL and SIGTERM of a live runner on an embedded PostgreSQL of its own (issue 24 item 4,
issue 27 item 4). SIGKILL leaves the embedded server running with the dead pid in its handle file,
the run's schema and its temporary folder; the next start removes all of them, says so, and
stops the server when it exits (no live holder is left). SIGTERM cleans up at once, like Ctrl-C.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
import psycopg
import pytest

pytestmark = [pytest.mark.live, pytest.mark.postgres]

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def own_server(tmp_path):
    """The environment of a Lease Lab process with an embedded server and a temp dir of its own.
    The server's data lives outside pytest's temporary tree: each pytest session that starts (a
    pytest-xdist worker, another run) makes /tmp/pytest-of-<user> private again, and the server's
    own user (Lease Lab runs it as postgres when root) would lose its way to the data."""
    (tmp_path / "tmp").mkdir()
    home = Path(tempfile.mkdtemp(prefix="leaselab-test-pg-"))
    env = {k: v for k, v in os.environ.items() if k not in ("LEASELAB_DSN", "DATABASE_URL")}
    env.update(LEASELAB_PGDATA=str(home / "pg"), TMPDIR=str(tmp_path / "tmp"))
    yield env
    postmaster = _postmaster(home / "pg")
    if postmaster is not None:  # a failed test: do not leave the server behind
        postmaster.terminate()
        with contextlib.suppress(psutil.Error):
            postmaster.wait(30)
    shutil.rmtree(home, ignore_errors=True)


def _postmaster(pgdata: Path) -> psutil.Process | None:
    try:
        pid = int((pgdata / "postmaster.pid").read_text().split()[0])
        process = psutil.Process(pid)
    except (OSError, ValueError, IndexError, psutil.Error):
        return None
    return process if process.is_running() and process.status() != "zombie" else None


def _live(env, *extra) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "sim", "live", "crash-recovery", "--duration", "120", *extra],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


def _await_running(env, proc, timeout: float = 120) -> Path:
    """The live run's temporary folder, once every child has started (the runner's records
    exist)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = list(Path(env["TMPDIR"]).glob("leaselab-live-*/records/runner.jsonl"))
        if found:
            return found[0].parent.parent
        assert proc.poll() is None, proc.stderr.read()
        time.sleep(0.1)
    raise AssertionError("the live run did not start")


def _schemas(pgdata: Path) -> list[str]:
    with psycopg.connect(f"postgresql://postgres@/postgres?host={pgdata}", autocommit=True) as c:
        return [
            n
            for (n,) in c.execute("SELECT nspname FROM pg_namespace WHERE nspname LIKE 'leaselab%'")
        ]


@pytest.mark.timeout(300)
def test_after_sigkill_of_the_runner_the_next_start_cleans_up_everything(own_server):
    pgdata = Path(own_server["LEASELAB_PGDATA"])
    runner = _live(own_server)
    folder = _await_running(own_server, runner)
    schema = json.loads((folder / "run.json").read_text())["schema"]
    runner.send_signal(signal.SIGKILL)
    runner.wait()
    time.sleep(1.0)
    # what SIGKILL leaves: the server running, its dead holder registered, the schema, the folder
    assert _postmaster(pgdata) is not None
    assert json.loads((pgdata / ".handle_pids.json").read_text()) == [runner.pid]
    assert _schemas(pgdata) == [schema] and folder.exists()

    nxt = subprocess.run(
        [
            sys.executable,
            "-m",
            "sim",
            "run",
            "baseline",
            "--backend",
            "postgres",
            "--set",
            "horizon=5",
        ],
        cwd=ROOT,
        env=own_server,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert nxt.returncode == 0, nxt.stderr
    warnings = [line for line in nxt.stderr.splitlines() if line.startswith("warning: cleaned up")]
    assert warnings == [
        f"warning: cleaned up after runs that died: removed stale pid {runner.pid} from "
        f"{pgdata / '.handle_pids.json'}"
    ] + [
        f"warning: cleaned up after runs that died: removed schema {schema} (pid {runner.pid} has "
        f"exited); folder {folder} (pid {runner.pid} has exited)"
    ], nxt.stderr
    assert not folder.exists()
    assert json.loads((pgdata / ".handle_pids.json").read_text()) == []
    deadline = time.monotonic() + 10
    while _postmaster(pgdata) is not None and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _postmaster(pgdata) is None  # the next run's exit stopped the server: nobody holds it


@pytest.mark.timeout(300)
def test_sigterm_of_the_runner_cleans_up_like_ctrl_c(own_server):
    pgdata = Path(own_server["LEASELAB_PGDATA"])
    runner = _live(own_server, "--sql", str(ROOT / "examples" / "queues" / "seed"))
    folder = _await_running(own_server, runner)
    runner.send_signal(signal.SIGTERM)
    _, err = runner.communicate(timeout=60)
    assert runner.returncode == 143 and err.strip().splitlines()[-1] == "terminated", err
    assert not folder.exists()
    assert _ours(own_server) == []
    deadline = time.monotonic() + 10
    while _postmaster(pgdata) is not None and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _postmaster(pgdata) is None  # the runner held the server alone and stopped it
    assert json.loads((pgdata / ".handle_pids.json").read_text()) == []
    look = (
        "from sim.db.server import embedded_server; import psycopg; c = "
        'psycopg.connect(embedded_server().get_uri()); print(c.execute("SELECT count(*) FROM '
        "pg_namespace WHERE nspname LIKE 'leaselab%'\").fetchone()[0], c.execute(\"SELECT count(*) "
        "FROM pg_roles WHERE rolname LIKE 'leaselab%'\").fetchone()[0])"
    )
    seen = subprocess.run(
        [sys.executable, "-c", look], env=own_server, capture_output=True, text=True, timeout=120
    )
    assert seen.stdout.split() == ["0", "0"], seen.stderr  # the run's schema and role were dropped


def _ours(env) -> list[int]:
    """Processes with this test's temporary directory in their environment (live children)."""
    found = []
    for process in psutil.process_iter():
        try:
            if process.environ().get("TMPDIR") == env["TMPDIR"] and process.status() != "zombie":
                found.append(process.pid)
        except psutil.Error:
            continue
    return found
