"""The run's schema on a real server (sim.db.postgres): created with its tables (for a user's queue
owned by a role of the run's own, sim.db.queue.sandbox) or found when a run kept it, the session
each client opens in it, SQL text run in it, and its server processes ended and schema dropped."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

import psycopg
from psycopg import sql

from sim.db import wire
from sim.db.base import Rows
from sim.db.errors import ClientStateError, DatabaseError, StatementStuckError
from sim.db.lock_waits import _Client
from sim.db.queries import bookkeeping_sql, job_schema_sql, schema_sql
from sim.db.queue.directory import SCHEMA_FILE, QueueDefinition
from sim.db.queue.guard import QueueGuard
from sim.db.queue.sandbox import (
    Sandbox,
    admin_session,
    close_reader,
    create_bookkeeping,
    kept_reader,
)
from sim.db.queue.sandbox import create as create_sandbox
from sim.db.queue.user_sql import run_schema, settings_of
from sim.db.server import connection_error, describe_dsn, open_connection, redact_dsn

if TYPE_CHECKING:
    from psycopg.abc import Params, QueryNoTemplate

log = logging.getLogger("sim.db.postgres")

TERMINATE_TIMEOUT_S = 10.0
READER_TIMEOUT_MS = 10_000  # run_sql(read_only=True): a reader's statement may take this long
# A paused waiter must be asleep in its lock wait, not inside PostgreSQL's deadlock check (which
# holds the lock manager's locks): where allowed, client sessions push that check far away. The
# driver breaks cycles of waits itself (sim.db.postgres `_wait`).
CLIENT_DEADLOCK_TIMEOUT = "10min"

# Server administration, not simulation queries (those all come from sql/queries.sql).
_TERMINATE = "SELECT pg_terminate_backend(pid) FROM unnest(%s::int[]) AS t(pid)"
_ALIVE = "SELECT count(*) FROM pg_stat_activity WHERE pid = ANY(%s::int[])"


def find_kept_schema(monitor: psycopg.Connection, dsn: str, schema: str) -> Sandbox | None:
    """Check that a run kept `schema`; the reader role that reads it, if its own role owns it."""
    try:
        [(found,)] = monitor.execute(
            "SELECT count(*) FROM pg_tables WHERE schemaname = %s AND tablename = 'ledger'",
            (schema,),
        ).fetchall()
    except psycopg.OperationalError as exc:
        raise connection_error(dsn, exc) from None
    if not found:
        raise DatabaseError(
            f"no Lease Lab schema {schema} at {describe_dsn(dsn)}; "
            "list the kept ones with SELECT nspname FROM pg_namespace "
            "WHERE nspname LIKE 'leaselab_%'"
        )
    return kept_reader(monitor, dsn, schema)


def create_run_schema(
    monitor: psycopg.Connection,
    dsn: str,
    schema: str,
    *,
    queue: QueueDefinition | None,
    keep: bool,
    superuser: bool,
    guard: QueueGuard | None,
    created: Callable[[Sandbox], None],
) -> bytes | None:
    """The run's schema (for a user's queue: owned by a role of the run's own, which every client
    logs in as), with Lease Lab's tables and the job table. `created` gets the sandbox as soon as
    it exists (so that a failure after it still drops it); returns the run role's settings as
    Lease Lab set them (None without a role of its own)."""
    settings = {"deadlock_timeout": CLIENT_DEADLOCK_TIMEOUT} if superuser else {}
    sandbox = create_sandbox(
        monitor,
        dsn,
        schema=schema,
        own_rights=queue is None or queue.own_rights,
        user_sql=queue is not None,
        keep=keep,
        role_settings=settings,
    )
    created(sandbox)
    if sandbox.role is not None:  # Lease Lab's own tables: out of the role's reach
        create_bookkeeping(monitor, sandbox, bookkeeping_sql())
    role_settings = None
    conn = sandbox.connect(application_name="leaselab:schema")
    try:
        with conn.transaction():
            if sandbox.role is not None:
                role_settings = settings_of(conn.pgconn)
            if queue is None:
                conn.execute(schema_sql())
            else:
                if sandbox.role is None:
                    conn.execute(bookkeeping_sql())
                if queue.job_schema is None:
                    conn.execute(job_schema_sql())
                else:
                    run_schema(
                        conn.pgconn,
                        queue.job_schema,
                        queue.file(SCHEMA_FILE),
                        sandbox.limit,
                        guard.budget if guard is not None else None,
                    )
    except psycopg.OperationalError as exc:
        raise connection_error(dsn, exc) from None
    except psycopg.Error as exc:  # the check passed it: the server changed in between
        raise DatabaseError(
            f"PostgreSQL at {describe_dsn(dsn)} refused the schema of the run: "
            f"{' '.join(str(exc).split())}"
        ) from None
    finally:
        conn.close()
    log.info("created schema %s at %s", schema, redact_dsn(dsn))
    return role_settings


def open_session(
    client_dsn: str, schema: str, client: str, *, deadlock_timeout: bool
) -> psycopg.Connection:
    """A client's connection, in autocommit, with the search_path of the run's schema."""
    conn = open_connection(client_dsn, autocommit=True, application_name=f"leaselab:{client}")
    try:
        conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))
        # Commits stay atomic and immediately visible; only their survival of a server crash,
        # which Lease Lab never simulates, is given up for not waiting on a WAL flush each time.
        conn.execute("SET synchronous_commit TO off")
        conn.execute("SET TimeZone TO 'UTC'")  # a queue's timestamp columns hold UTC
        if deadlock_timeout:
            conn.execute(
                sql.SQL("SET deadlock_timeout TO {}").format(sql.Literal(CLIENT_DEADLOCK_TIMEOUT))
            )
    except BaseException:
        conn.close()
        raise
    return conn


def run_sql_on(
    conn: psycopg.Connection, schema: str, text: str, params: Params | None, read_only: bool
) -> tuple[list[str], Rows]:
    """SQL text in the run's schema, in a transaction of its own: (column names, rows). read_only:
    prepared (one statement), READ ONLY, under a statement timeout, and rolled back."""
    with conn.transaction(force_rollback=read_only):
        if read_only:
            conn.execute("SET TRANSACTION READ ONLY")
            conn.execute(
                "SELECT set_config('statement_timeout', %s, true)", (str(READER_TIMEOUT_MS),)
            )
        conn.execute(sql.SQL("SET LOCAL search_path TO {}").format(sql.Identifier(schema)))
        cur = conn.execute(text, params, prepare=True if read_only else None)
        if cur.description is None:
            return [], []
        return [d.name for d in cur.description], cur.fetchall()


def disconnect(
    states: list[_Client],
    thaw: Callable[[_Client], None],
    admin: Callable[..., Rows],
    pids: dict[int, str],
    dsn: str,
) -> None:
    """Kill the clients' server processes (PostgreSQL rolls back and releases their locks,
    abandoning any statement they were waiting in), then close their sockets."""
    opened = [s for s in states if s.conn is not None]
    for state in opened:
        thaw(state)
        if state.signals:  # even if a Ctrl-C fell between a pause and its bookkeeping
            with contextlib.suppress(OSError):
                os.kill(state.pid, signal.SIGCONT)
    ended = [s.pid for s in opened]
    if ended:
        end_server_processes(admin, ended, dsn)
    for state in opened:
        with contextlib.suppress(Exception):
            if state.conn is not None:  # an opened client's, always
                state.conn.close()
        pids.pop(state.pid, None)
        state.conn, state.pg, state.tx, state.pid, state.fd = None, None, None, 0, -1
    for state in states:
        state.in_tx = state.begun = state.piped = state.cancelled = False
        state.pending = state.holder = None


def end_server_processes(admin: Callable[..., Rows], pids: list[int], dsn: str) -> None:
    """pg_terminate_backend the clients' server processes (PostgreSQL rolls back and releases
    their locks), and return once they are gone."""
    admin(_TERMINATE, (pids,))
    deadline = time.monotonic() + TERMINATE_TIMEOUT_S
    while admin(_ALIVE, (pids,))[0][0]:
        if time.monotonic() > deadline:
            raise StatementStuckError(
                f"server processes {pids} at {describe_dsn(dsn)} did not exit "
                f"within {TERMINATE_TIMEOUT_S:.0f} s of pg_terminate_backend"
            )
        time.sleep(0.0005)


def drop_run_schema(
    monitor: psycopg.Connection,
    dsn: str,
    schema: str,
    *,
    sandbox: Sandbox | None,
    reader: Sandbox | None,
    keep: bool,
) -> None:
    """Drop the run's schema and role (or keep the schema). A backend attached to a kept schema
    (no sandbox of its own) closes its reader and drops that schema unless told to keep it."""
    if sandbox is None:
        if reader is not None:
            close_reader(monitor, reader)
        if not keep:  # the schema and the role that owns it go (it was kept for this inspection)
            Sandbox(dsn, schema, reader.role if reader else None).drop(monitor)
    else:
        sandbox.drop(monitor, keep_schema=keep)
    if keep:
        log.info("kept schema %s at %s", schema, redact_dsn(dsn))


class RunSchema:
    """A run's schema on one server and the monitor connection that administers it: set up when
    made (created, or found when `existing`), dropped (or kept) by `close`."""

    def __init__(
        self,
        dsn: str,
        schema: str,
        *,
        keep: bool,
        queue: QueueDefinition | None,
        guard: QueueGuard | None,
        existing: bool,
    ) -> None:
        self.dsn, self.schema, self.user_sql = dsn, schema, queue is not None
        self.monitor = open_connection(dsn, autocommit=True, application_name="leaselab:monitor")
        admin_session(self.monitor)
        self.reader: Sandbox | None = None  # attached to a kept sandbox: its role reads
        self.settings: bytes | None = None  # the run role's settings (catalog), to keep
        self.sandbox: Sandbox | None = None  # the run's schema and the role the user's SQL runs as
        try:
            [(rolsuper,)] = self.monitor.execute(
                "SELECT rolsuper FROM pg_roles WHERE rolname = current_user"
            ).fetchall()
            self.superuser = rolsuper is True
            if existing:
                self.reader = find_kept_schema(self.monitor, dsn, schema)
            else:
                self.settings = create_run_schema(
                    self.monitor,
                    dsn,
                    schema,
                    queue=queue,
                    keep=keep,
                    superuser=self.superuser,
                    guard=guard,
                    created=self._created,
                )
        except BaseException:
            if self.sandbox is not None:
                with contextlib.suppress(Exception):
                    self.sandbox.drop(self.monitor)
            self.monitor.close()
            raise

    def _created(self, sandbox: Sandbox) -> None:
        self.sandbox = sandbox

    @property
    def sandboxed(self) -> Sandbox | None:
        """The sandbox, when the statements are a user's (a queue), else None."""
        return self.sandbox if self.user_sql else None

    @property
    def client_dsn(self) -> str:
        """The DSN a client of this run connects with: the run's role for a user's queue
        (sim.db.queue.sandbox), else the DSN itself. It may hold the role's one-run password."""
        if self.sandbox is not None:
            return self.sandbox.dsn
        return self.reader.dsn if self.reader is not None else self.dsn

    def open_session(self, client: str, guard: QueueGuard | None) -> psycopg.Connection:
        """A client's connection in the run's schema, reading times as simulated seconds; where
        allowed, with the deadlock check pushed away (sim.db.lock_waits). The run role's settings
        must be as Lease Lab set them (else the guard's error)."""
        own_deadlock_timeout = self.superuser and self.sandboxed is None and self.reader is None
        try:
            conn = open_session(
                self.client_dsn, self.schema, client, deadlock_timeout=own_deadlock_timeout
            )
        except psycopg.OperationalError as exc:
            raise connection_error(self.dsn, exc) from None
        try:
            wire.register_loaders(conn)
            if self.settings is not None and settings_of(conn.pgconn) != self.settings:
                conn.close()
                raise guard.settings_changed() if guard else ClientStateError(client)
        except psycopg.OperationalError as exc:
            conn.close()
            raise connection_error(self.dsn, exc) from None
        return conn

    def stuck_after(self, default: float) -> float:
        """Seconds a statement may run without waiting on another client's lock: a user's
        queue's time limit and a second (the server's statement_timeout speaks first)."""
        sandbox = self.sandboxed
        if sandbox is not None and sandbox.limit is not None:
            return sandbox.limit + 1.0
        return default

    def admin(self, statement: QueryNoTemplate, params: Params | None = None) -> Rows:
        """A server administration statement on the monitor connection: its rows."""
        try:
            cur = self.monitor.execute(statement, params)
        except psycopg.OperationalError as exc:
            raise connection_error(self.dsn, exc) from None
        return cur.fetchall() if cur.description else []

    def run_sql(self, text: str, params: Params | None, read_only: bool) -> tuple[list[str], Rows]:
        """SQL text in the run's schema (run_sql_on): a queue's objects are read as its role."""
        box = self.sandboxed or self.reader
        if box is None:
            return run_sql_on(self.monitor, self.schema, text, params, read_only)
        conn = box.connect(application_name="leaselab:sql")
        try:
            return run_sql_on(conn, self.schema, text, params, read_only)
        finally:
            conn.close()

    def close(self, end_clients: Callable[[], None], keep: bool) -> None:
        """`end_clients` (their server processes), then drop the run's schema and role (or keep
        the schema), and close the monitor."""
        try:
            try:
                self._release(end_clients, keep)
            except (psycopg.Error, DatabaseError):
                # A Ctrl-C or SIGTERM that cancelled a monitor statement can leave the monitor
                # closed, or its cancel land on the next statement: release on a fresh connection.
                self.monitor.close()
                self.monitor = open_connection(
                    self.dsn, autocommit=True, application_name="leaselab:monitor"
                )
                admin_session(self.monitor)
                self._release(end_clients, keep)
        finally:
            self.monitor.close()

    def _release(self, end_clients: Callable[[], None], keep: bool) -> None:
        """Safe to call again after a failure part way."""
        end_clients()
        reader, self.reader = self.reader, None
        drop_run_schema(
            self.monitor,
            self.dsn,
            self.schema,
            sandbox=self.sandbox,
            reader=reader,
            keep=keep,
        )
