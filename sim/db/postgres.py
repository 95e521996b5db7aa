"""PostgresBackend: the Backend protocol on a real PostgreSQL, through psycopg 3.

Each backend creates its own schema `leaselab_<hex>` (tables from schema_sql()) and drops it on
close. Each simulated client owns one connection served by its own worker thread, so a statement
waiting on a row lock never blocks the driving (SimPy) thread: `execute` submits the named query's
SQL text with bound parameters and waits briefly; if the statement is still running, a monitor
connection asks pg_blocking_pids() which client's transaction holds the lock, and `Blocked` names it.

Determinism: a wait is reported only once its holder waits for the driver (idle in its
transaction, or blocked itself); after every commit, rollback, crash or failed statement the
blocked statements run until they finish or wait again; and a statement that would close a cycle
of waits is cancelled at once and fails with 40P01, as in MemoryBackend, instead of leaving the
victim to PostgreSQL's wall-clock deadlock timer. So the server sees the interleaving the driver
chose.
"""

from __future__ import annotations

import logging
import queue
import secrets
import threading
import time
from concurrent.futures import Future
from datetime import datetime
from functools import cache

import psycopg
from psycopg import errors as pg_errors
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict

from sim.db.base import Blocked, Rows, from_timestamp, to_timestamp
from sim.db.errors import (
    ClientCrashedError,
    ClientStateError,
    DatabaseError,
    DeadlockDetectedError,
    LockNotAvailableError,
    StatementError,
    TransactionAbortedError,
    UniqueViolationError,
)
from sim.db.queries import Query, get_query, load_queries, schema_sql
from sim.db.server import (
    connect_dsn,
    connection_error,
    describe_dsn,
    open_connection,
    redact_dsn,
    unavailable,
)

log = logging.getLogger(__name__)

FIRST_WAIT_S = 0.005  # a statement usually finishes well within this; only waits pay it
MAX_WAIT_S = 0.05  # longest pause between two lock checks of one statement
STATEMENT_TIMEOUT_S = 60.0  # a statement neither finished nor waiting on a client: give up
TERMINATE_TIMEOUT_S = 10.0

# Server administration, not simulation queries (those all come from sql/queries.sql).
_BLOCKERS = """
SELECT b.pid, coalesce(a.state, ''), coalesce(a.wait_event_type, ''),
       (SELECT l.locktype FROM pg_locks l WHERE l.pid = %(pid)s AND NOT l.granted LIMIT 1)
FROM unnest(pg_blocking_pids(%(pid)s)) AS b(pid) LEFT JOIN pg_stat_activity a ON a.pid = b.pid
ORDER BY b.pid
"""
_TERMINATE = "SELECT pg_terminate_backend(pid) FROM unnest(%s::int[]) AS t(pid)"
_ALIVE = "SELECT count(*) FROM pg_stat_activity WHERE pid = ANY(%s::int[])"
_CANCEL = "SELECT pg_cancel_backend(%s)"


class StatementStuckError(DatabaseError):
    """A statement neither finished nor waited on another client's lock within the timeout."""


class ServerStatementError(StatementError):
    """Any other error PostgreSQL reported for a statement, with its own SQLSTATE."""

    def __init__(self, query: str, message: str, sqlstate: str):
        self.sqlstate = sqlstate
        super().__init__(query, message)


class _Worker:
    """A daemon thread running one client's calls in order, so only it touches that connection."""

    def __init__(self, name: str):
        self._calls: queue.SimpleQueue = queue.SimpleQueue()
        threading.Thread(target=self._loop, name=name, daemon=True).start()

    def submit(self, fn, *args) -> Future:
        future: Future = Future()
        self._calls.put((future, fn, args))
        return future

    def stop(self) -> None:
        self._calls.put(None)

    def _loop(self) -> None:
        while (call := self._calls.get()) is not None:
            future, fn, args = call
            try:
                future.set_result(fn(*args))
            except BaseException as exc:  # handed to whoever collects the future
                future.set_exception(exc)


class _Client:
    """One simulated client: its connection (opened lazily), worker and transaction state."""

    __slots__ = ("conn", "pid", "worker", "in_tx", "crashed", "pending", "cancelled")

    def __init__(self):
        self.conn: psycopg.Connection | None = None
        self.pid = 0
        self.worker: _Worker | None = None
        self.in_tx = False
        self.crashed = False
        self.pending: tuple[str, Future] | None = None  # (query, statement) that returned Blocked
        self.cancelled = False  # its statement was cancelled to break a deadlock


def _run(conn: psycopg.Connection, text: str, params: dict | None, prepare: bool) -> Rows:
    """Run one statement on the worker thread; times come back as simulated seconds."""
    cur = conn.execute(text, params, prepare=prepare)
    if cur.description is None:
        return []
    return [
        tuple(from_timestamp(v) if isinstance(v, datetime) else v for v in row)
        for row in cur.fetchall()
    ]


class PostgresBackend:
    """The Backend protocol on a real server, in a schema of its own. Driven by one thread."""

    name = "postgres"

    def __init__(self, dsn: str | None = None, *, keep_schema: bool = False, schema: str | None = None):
        self.dsn = connect_dsn(dsn)
        self.schema = schema or f"leaselab_{secrets.token_hex(6)}"
        self.keep_schema = keep_schema
        self._queries = load_queries()
        self._clients: dict[str, _Client] = {}
        self._pids: dict[int, str] = {}  # backend pid -> client, for naming lock holders
        self._monitor = open_connection(self.dsn, autocommit=True, application_name="leaselab:monitor")
        self._closed = False
        try:
            self._create_schema()
        except BaseException:
            self._monitor.close()
            raise

    def __repr__(self) -> str:
        return f"PostgresBackend({redact_dsn(self.dsn)!r}, schema={self.schema!r})"

    def _create_schema(self) -> None:
        ident = sql.Identifier(self.schema)
        try:
            with self._monitor.transaction():
                self._monitor.execute(sql.SQL("CREATE SCHEMA {}").format(ident))
                self._monitor.execute(sql.SQL("SET LOCAL search_path TO {}").format(ident))
                self._monitor.execute(schema_sql())
        except pg_errors.InsufficientPrivilege as exc:
            info = conninfo_to_dict(self.dsn)
            raise unavailable(
                self.dsn,
                f"cannot CREATE SCHEMA ({exc.diag.message_primary})",
                f"grant it with GRANT CREATE ON DATABASE {info.get('dbname', '<db>')} "
                f"TO {info.get('user', '<user>')}, or use another DSN",
            ) from None
        except pg_errors.DuplicateSchema:
            raise DatabaseError(
                f"schema {self.schema} already exists at {describe_dsn(self.dsn)}; "
                "Lease Lab never reuses a schema: choose another name or drop it"
            ) from None
        log.info("created schema %s at %s", self.schema, redact_dsn(self.dsn))

    # ---- connections and transactions -------------------------------------------------------

    def connect(self, client: str) -> None:
        state = self._clients.get(client)
        if state is not None and not state.crashed:
            raise ClientStateError(f"client {client} is already connected")
        self._clients[client] = _Client()

    def _client(self, client: str, query: str) -> _Client:
        state = self._clients.get(client)
        if state is None:
            raise ClientStateError(f"client {client} is not connected (call connect first)")
        if state.crashed:
            raise ClientCrashedError(client, query)
        return state

    def _ready(self, client: str, state: _Client) -> None:
        """Open the client's connection on first use, with the search_path of this run's schema."""
        if state.conn is not None:
            return
        conn = open_connection(self.dsn, autocommit=True, application_name=f"leaselab:{client}")
        conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(self.schema)))
        # Commits stay atomic and immediately visible; only their survival of a server crash,
        # which Lease Lab never simulates, is given up for not waiting on a WAL flush each time.
        conn.execute("SET synchronous_commit TO off")
        state.conn, state.pid = conn, conn.info.backend_pid
        state.worker = _Worker(f"leaselab-{client}")
        self._pids[state.pid] = client

    def _idle(self, client: str, state: _Client, what: str) -> None:
        if state.pending is not None:
            raise ClientStateError(
                f"client {client} still has a blocked {state.pending[0]}; resume it before {what}"
            )

    def begin(self, client: str) -> None:
        state = self._client(client, "BEGIN")
        if state.in_tx:
            raise ClientStateError(f"client {client} is already in a transaction")
        self._idle(client, state, "BEGIN")
        self._ready(client, state)
        self._control(client, state, "BEGIN")
        state.in_tx = True

    def commit(self, client: str) -> None:
        state = self._client(client, "COMMIT")
        if not state.in_tx:
            raise ClientStateError(f"client {client} has no transaction to commit")
        self._idle(client, state, "COMMIT")
        state.in_tx = False
        self._control(client, state, "COMMIT")  # PostgreSQL rolls back an aborted transaction
        self._settle_waiters()

    def rollback(self, client: str) -> None:
        state = self._client(client, "ROLLBACK")
        if not state.in_tx:
            return
        self._idle(client, state, "ROLLBACK")
        state.in_tx = False
        self._control(client, state, "ROLLBACK")
        self._settle_waiters()

    def _control(self, client: str, state: _Client, command: str) -> None:
        future = state.worker.submit(_run, state.conn, command, None, False)
        if self._wait(client, state, command, future) is not None:
            raise StatementStuckError(f"client {client}: {command} unexpectedly waited on a lock")
        self._result(command, future)

    def crash(self, client: str) -> None:
        state = self._clients.get(client)
        if state is None or state.crashed:
            return
        self._disconnect([state])
        state.crashed = True
        self._settle_waiters()

    def in_transaction(self, client: str) -> bool:
        state = self._clients.get(client)
        return state is not None and state.in_tx

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            self._disconnect(list(self._clients.values()))
            self._clients.clear()
            if self.keep_schema:
                log.info("kept schema %s at %s", self.schema, redact_dsn(self.dsn))
            else:
                self._admin(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(self.schema)))
        finally:
            self._monitor.close()

    def _disconnect(self, states: list[_Client]) -> None:
        """Kill the clients' server processes (PostgreSQL rolls back and releases their locks,
        abandoning any statement they were waiting in), then close their sockets."""
        opened = [s for s in states if s.conn is not None]
        pids = [s.pid for s in opened]
        if pids:
            self._admin(_TERMINATE, (pids,))
            self._await_exit(pids)
        for state in opened:
            state.worker.submit(state.conn.close)
            state.worker.stop()
            del self._pids[state.pid]
            state.conn, state.worker, state.pid = None, None, 0
        for state in states:
            state.in_tx, state.pending = False, None

    def _await_exit(self, pids: list[int]) -> None:
        """Return once the server processes are gone: their transactions have been rolled back."""
        deadline = time.monotonic() + TERMINATE_TIMEOUT_S
        while self._admin(_ALIVE, (pids,))[0][0]:
            if time.monotonic() > deadline:
                raise StatementStuckError(
                    f"server processes {pids} at {describe_dsn(self.dsn)} did not exit "
                    f"within {TERMINATE_TIMEOUT_S:.0f} s of pg_terminate_backend"
                )
            time.sleep(0.001)

    def _admin(self, statement, params: tuple | dict | None = None) -> list[tuple]:
        """Run a server administration statement on the monitor connection."""
        try:
            cur = self._monitor.execute(statement, params)
        except psycopg.OperationalError as exc:
            raise connection_error(self.dsn, exc) from None
        return cur.fetchall() if cur.description else []

    # ---- statements ---------------------------------------------------------------------------

    def execute(self, client: str, query: str, params: dict) -> Rows | Blocked:
        q = self._queries.get(query) or get_query(query)
        state = self._client(client, query)
        self._idle(client, state, query)
        q.check(params)
        self._ready(client, state)
        future = state.worker.submit(_run, state.conn, q.sql, _bind(q, params), True)
        return self._outcome(client, state, query, future)

    def resume(self, client: str) -> Rows | Blocked:
        state = self._client(client, "resume")
        if state.pending is None:
            raise ClientStateError(f"client {client} has no blocked statement to resume")
        query, future = state.pending
        state.pending = None
        return self._outcome(client, state, query, future)

    def _outcome(self, client: str, state: _Client, query: str, future: Future) -> Rows | Blocked:
        holder = self._wait(client, state, query, future)
        if holder is not None:
            state.pending = (query, future)
            return Blocked(client, query, holder)
        deadlock, state.cancelled = state.cancelled, False
        if future.exception() is not None:
            self._settle_waiters()  # a failed statement (and its transaction) released its locks
        return self._result(query, future, deadlock)

    def _wait(self, client: str, state: _Client, query: str, future: Future) -> str | None:
        """Wait until the statement finishes (None) or waits on a lock of an idle holder (its name)."""
        deadline = time.monotonic() + STATEMENT_TIMEOUT_S
        pause = FIRST_WAIT_S
        while True:
            try:
                future.exception(timeout=pause)
                return None
            except TimeoutError:
                pass
            found = self._lock_holder(state.pid)
            if found is not None:
                holder, waiting = found
                if not (waiting and self._waits_on(holder, state.pid)):
                    return self._pids[holder]
                self._cancel(state)
            if time.monotonic() > deadline:
                self.crash(client)
                raise StatementStuckError(
                    f"client {client}: {query} neither finished nor waited on another client's "
                    f"lock within {STATEMENT_TIMEOUT_S:.0f} s at {describe_dsn(self.dsn)}; "
                    "its connection was closed"
                )
            pause = min(pause * 2, MAX_WAIT_S)

    def _cancel(self, state: _Client) -> None:
        """Break a deadlock at the statement closing the cycle, as MemoryBackend does, instead of
        leaving PostgreSQL's detector to pick a victim by wall-clock wait time."""
        if not state.cancelled:
            state.cancelled = True
            self._admin(_CANCEL, (state.pid,))

    def _lock_holder(self, pid: int) -> tuple[int, bool] | None:
        """(backend pid, is it waiting itself) of the transaction holding the lock `pid` waits
        for, once that transaction waits for the driver: idle in it, or waiting on a lock. None
        while `pid` does not wait or its holder is still running. Waiters queued ahead for the
        same row (holding its tuple lock) are followed to the row's holder."""
        seen = set()
        while pid not in seen:
            seen.add(pid)
            rows = self._admin(_BLOCKERS, {"pid": pid})
            if rows and rows[0][3] == "tuple":
                queued = [p for p, _, wait, _ in rows if wait == "Lock"]
                if not queued:
                    return None
                pid = queued[0]
                continue
            stable = sorted(
                (self._pids[p], p, wait == "Lock") for p, activity, wait, _ in rows
                if p in self._pids and (activity.startswith("idle in transaction") or wait == "Lock")
            )
            return stable[0][1:] if stable else None
        return None

    def _waits_on(self, pid: int, target: int) -> bool:
        """Does the chain of lock waits starting at `pid` reach `target`?"""
        seen = set()
        while pid not in seen:
            seen.add(pid)
            found = self._lock_holder(pid)
            if found is None:
                return False
            pid, waiting = found
            if pid == target:
                return True
            if not waiting:
                return False
        return False

    def _settle_waiters(self) -> None:
        """After a transaction ended, let blocked statements run until they finish or wait again."""
        for client, state in self._clients.items():
            if state.pending is not None:
                self._wait(client, state, state.pending[0], state.pending[1])

    def _result(self, query: str, future: Future, deadlock: bool = False) -> Rows:
        try:
            return future.result()
        except psycopg.Error as exc:
            raise self._statement_error(query, exc, deadlock) from None

    def _statement_error(self, query: str, exc: psycopg.Error, deadlock: bool) -> DatabaseError:
        message = exc.diag.message_primary or str(exc).strip().splitlines()[0]
        if isinstance(exc, pg_errors.DeadlockDetected) or (
            deadlock and isinstance(exc, pg_errors.QueryCanceled)
        ):
            return DeadlockDetectedError(query, "deadlock detected")
        if isinstance(exc, pg_errors.LockNotAvailable):
            return LockNotAvailableError(query, message)
        if isinstance(exc, pg_errors.InFailedSqlTransaction):
            return TransactionAbortedError(query, message)
        if isinstance(exc, pg_errors.UniqueViolation):
            return UniqueViolationError(query, message)
        if exc.sqlstate is None:  # the connection itself failed
            return unavailable(self.dsn, f"lost the connection during {query} ({message})")
        return ServerStatementError(query, message, exc.sqlstate)


def _bind(q: Query, params: dict) -> dict:
    """Parameters as psycopg binds them: time parameters become timestamptz."""
    times = _time_params(q)
    return {k: to_timestamp(v) if k in times else v for k, v in params.items()}


@cache
def _time_params(q: Query) -> frozenset[str]:
    return frozenset(name for name, kind in q.params if kind == "time")
