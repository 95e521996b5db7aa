"""PostgresBackend: the Backend protocol on a real PostgreSQL, through psycopg 3.

Each backend creates its own schema `leaselab_<hex>` (tables from schema_sql()) and drops it on
close (or at interpreter exit if never closed). With `queue=` (a user's queue directory, see
sim.db.queue.directory) the job table and the statements are the user's, checked on the server
first, and every client logs in as a role of the run's own that owns only that schema
(sim.db.queue.sandbox); Lease Lab's bookkeeping tables are created beside them as always. Each
simulated client owns one connection, opened on first use. Everything runs on the driving (SimPy)
thread through psycopg's low-level libpq interface (`psycopg.pq`): a statement is sent as a prepared
statement with its parameters bound separately (dumped by psycopg, never formatted into SQL), and
the driver polls the connection's socket. If the statement has not finished within a short poll, the
monitor connection asks pg_blocking_pids() which client's transaction holds the lock it waits for,
and `execute` returns `Blocked` naming that client; `resume` later collects the statement's real
outcome. BEGIN travels with the transaction's first statement (one pipeline, one round trip).

Determinism, and the waiters paused while their holder ends: sim.db.lock_waits.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import secrets
import time
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg import pq
from psycopg.adapt import Transformer

from sim.db import wire
from sim.db.base import Blocked, ClientTable, Rows
from sim.db.errors import (
    ClientStateError,
    DatabaseError,
    ServerStatementError,
    StatementStuckError,
)
from sim.db.lock_waits import FIRST_WAIT_S, MAX_WAIT_S, LockWaits, _Client
from sim.db.processes import may_signal
from sim.db.queries import get_query, load_queries
from sim.db.queue.adapter import QueueAdapter
from sim.db.queue.directory import QueueDefinition
from sim.db.queue.guard import QueueGuard
from sim.db.queue.sandbox import Sandbox, past_limit
from sim.db.run_schema import (
    RunSchema,
    disconnect,
)
from sim.db.server import (
    connect_dsn,
    connection_error,
    describe_dsn,
    redact_dsn,
    unavailable,
)
from sim.db.statement_results import (
    OK,
    RowStream,
    collect,
    loaded_rows,
    poll,
    send,
    statement_error,
)
from sim.errors import ConfigError

if TYPE_CHECKING:
    from psycopg.abc import Params, QueryNoTemplate

__all__ = ["PostgresBackend", "ServerStatementError", "StatementStuckError"]

log = logging.getLogger(__name__)

STATEMENT_TIMEOUT_S = 60.0  # a statement neither finished nor waiting on a client: give up
THAW_WATCHDOG_S = 1.0  # a transaction end taking this long with waiters paused: let them go


class PostgresBackend(LockWaits, ClientTable[_Client]):
    """The Backend protocol on a real server, in a schema of its own. Driven by one thread."""

    name = "postgres"
    _new_client = _Client

    def __init__(
        self,
        dsn: str | None = None,
        *,
        keep_schema: bool = False,
        schema: str | None = None,
        queue: QueueDefinition | None = None,
        _existing: bool = False,
    ):
        self.dsn = connect_dsn(dsn)
        self.schema = schema or f"leaselab_{secrets.token_hex(6)}"
        self.keep_schema = keep_schema or _existing
        self.queue = (
            queue  # a user's queue definition (checked on this server), or None: sql/ as is
        )
        if queue is not None:
            queue.check_on(self.dsn)
        self._queries = queue.queries if queue is not None else load_queries()
        # a user's queue: its own job ids, Lease Lab's lease count where it keeps no attempts
        self._adapter = QueueAdapter(queue) if queue is not None else None
        self._statements: dict[str, wire.Statement] = {}
        self._clients: dict[str, _Client] = {}
        self._pids: dict[int, str] = {}  # backend pid -> client, for naming lock holders
        self._waits = 0  # counter giving each wait its place in line
        self._locktype = ""  # what the last confirmed waiter waited for (pg_locks.locktype)
        # Evidence from the server itself: every wait pg_blocking_pids() confirmed, as (client,
        # query, holder, pg_locks.locktype), and every server process a crash killed (client, pid).
        self.lock_waits: list[tuple[str, str, str, str]] = []
        self.terminated: list[tuple[str, int]] = []
        # a user's queue: rows per statement capped, total time bounded, errors counted
        self.guard = QueueGuard(queue) if queue is not None else None
        self._closed = False
        self.run = RunSchema(
            self.dsn,
            self.schema,
            keep=self.keep_schema,
            queue=queue,
            guard=self.guard,
            existing=_existing,
        )
        monitor = self.run.monitor
        self.pauses_waiters = may_signal(monitor, monitor.info.backend_pid)
        atexit.register(self.close)  # a backend never closed still drops its schema at exit
        if not self.pauses_waiters:
            log.info(
                "server at %s is not local: lock waiters are settled in order without pausing "
                "them, and PostgreSQL may reorder two waiters on one row",
                describe_dsn(self.dsn),
            )

    @property
    def client_dsn(self) -> str:
        """The DSN a client of this run connects with (RunSchema.client_dsn)."""
        return self.run.client_dsn

    @property
    def sandbox(self) -> Sandbox | None:
        """The run's schema and the role the user's SQL runs as (sim.db.queue.sandbox)."""
        return self.run.sandbox

    @property
    def _monitor(self) -> psycopg.Connection:
        return self.run.monitor

    @property
    def statement_errors(self) -> list[dict[str, Any]]:
        """Each distinct error of the queue's statements, counted (sim.db.queue.guard)."""
        return self.guard.report() if self.guard is not None else []

    @classmethod
    def attach(cls, dsn: str | None, schema: str) -> PostgresBackend:
        """A backend on the tables of an existing schema (one a run kept for inspection):
        nothing is created, and closing it leaves the schema in place."""
        return cls(dsn, schema=schema, _existing=True)

    def __repr__(self) -> str:
        return f"PostgresBackend({redact_dsn(self.dsn)!r}, schema={self.schema!r})"

    # ---- connections and transactions -------------------------------------------------------

    def _open(self, client: str, state: _Client) -> None:
        """Open the client's connection on first use, with the search_path of this run's schema."""
        if state.conn is not None:
            return
        if self._closed:
            raise ClientStateError(f"the backend is closed: client {client} cannot connect")
        conn = self.run.open_session(client, self.guard)
        try:
            signals = self.pauses_waiters and may_signal(conn, conn.info.backend_pid)
        except psycopg.OperationalError as exc:
            conn.close()
            raise connection_error(self.dsn, exc) from None
        state.conn, state.pg, state.pid = conn, conn.pgconn, conn.info.backend_pid
        state.fd = state.pg.socket
        state.tx = Transformer(conn)
        state.prepared = set()
        state.signals = signals
        self._pids[state.pid] = client

    def _idle(self, client: str, state: _Client, what: str) -> None:
        if state.pending is not None:
            raise ClientStateError(
                f"client {client} still has a blocked {state.pending}; resume it before {what}"
            )

    def begin(self, client: str) -> None:
        state = self._client(client, "BEGIN")
        if state.in_tx:
            raise ClientStateError(f"client {client} is already in a transaction")
        self._idle(client, state, "BEGIN")
        state.in_tx, state.begun = True, False  # BEGIN goes out with the first statement

    def commit(self, client: str) -> None:
        state = self._client(client, "COMMIT")
        if not state.in_tx:
            raise ClientStateError(f"client {client} has no transaction to commit")
        self._idle(client, state, "COMMIT")
        self._end(client, state, b"COMMIT")  # PostgreSQL rolls back an aborted transaction

    def rollback(self, client: str) -> None:
        state = self._client(client, "ROLLBACK")
        if not state.in_tx:
            return
        self._idle(client, state, "ROLLBACK")
        self._end(client, state, b"ROLLBACK")

    def _end(self, client: str, state: _Client, command: bytes) -> None:
        state.in_tx = False
        if self._adapter is not None:
            self._adapter.ended(client, command == b"COMMIT")
        if not state.begun:
            return  # nothing reached the server
        state.begun = False
        self._freeze_waiters_of(client)
        try:
            pg = state.libpq()
            pg.send_query(command)
            pg.flush()
            self._await_control(client, state, command.decode())
        except psycopg.OperationalError as exc:
            raise self._lost(client, command.decode(), exc) from None
        self._holder_gone(client)

    def _await_control(self, client: str, state: _Client, command: str) -> None:
        """Collect a COMMIT/ROLLBACK, which never waits on a row lock. Should paused waiters hold
        up the server (a pause caught one inside the lock manager), let them go."""
        deadline = time.monotonic() + THAW_WATCHDOG_S
        while not self._poll(state, MAX_WAIT_S):
            if time.monotonic() > deadline and self._thaw_all():
                log.warning(
                    "%s of client %s was slow with waiters paused: they were let go, so "
                    "PostgreSQL may reorder them",
                    command,
                    client,
                )
                deadline = time.monotonic() + STATEMENT_TIMEOUT_S
            elif time.monotonic() > deadline:
                self.crash(client)
                raise StatementStuckError(
                    f"client {client}: {command} did not finish within "
                    f"{STATEMENT_TIMEOUT_S:.0f} s at {describe_dsn(self.dsn)}"
                )
        result = collect(state)
        if result.status not in OK:
            raise self._error(command, result, False)

    def crash(self, client: str) -> None:
        state = self._clients.get(client)
        if state is None or state.crashed:
            return
        if state.conn is not None and state.begun:
            self._freeze_waiters_of(client)
        if state.conn is not None:
            self.terminated.append((client, state.pid))
        self._disconnect([state])
        state.crashed = True
        if self._adapter is not None:
            self._adapter.ended(client, False)
        self._holder_gone(client)

    def in_transaction(self, client: str) -> bool:
        state = self._clients.get(client)
        return state is not None and state.in_tx

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        atexit.unregister(self.close)
        self.run.close(
            lambda: self._disconnect(list(self._clients.values()), clear=True), self.keep_schema
        )

    def __enter__(self) -> PostgresBackend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _disconnect(self, states: list[_Client], clear: bool = False) -> None:
        """Kill the clients' server processes (PostgreSQL rolls back and releases their locks,
        abandoning any statement they were waiting in), then close their sockets."""
        disconnect(states, self._thaw, self.admin, self._pids, self.dsn)
        if clear:
            self._clients.clear()

    def admin(self, statement: QueryNoTemplate, params: Params | None = None) -> Rows:
        """Run a server administration statement (a catalog read, pg_terminate_backend) on the
        monitor connection: its rows. Live mode watches and sizes the server through it."""
        return self.run.admin(statement, params)

    def run_sql(
        self, text: str, params: Params | None = None, *, read_only: bool = False
    ) -> tuple[list[str], Rows]:
        """Run SQL text (an operator's or a reader's, not a named query) in this backend's schema
        on its monitor connection: (column names, rows), times as timestamptz. It runs in a
        transaction of its own, rolled back if it fails. read_only (a reader's answer to an
        exercise): the text must be one statement (it is prepared on the server), runs in a READ
        ONLY transaction with a statement timeout, and is rolled back whatever it did; PostgreSQL
        refuses a write (25006)."""
        return self.run.run_sql(text, params, read_only)

    # ---- statements ---------------------------------------------------------------------------

    def execute(self, client: str, query: str, params: dict[str, Any]) -> Rows | Blocked:
        q = self._queries.get(query) or get_query(query)
        if self.queue is not None and query in self.queue.missing:
            raise self.queue.absent(query)
        state = self._client(client, query)
        self._idle(client, state, query)
        q.check(params)
        self._open(client, state)
        st = self._statements.get(query) or self._statements.setdefault(
            query, wire.statement(q, self.queue.id_oid) if self.queue else wire.statement(q)
        )
        if self._adapter is not None:
            params = self._adapter.bind(client, query, params)
        if self.guard is not None and query == "insert_job":
            self.guard.inserted += 1
        try:
            if st.name not in state.prepared:
                self._prepare(state, st, query)
            dumped = state.transformer().dump_sequence(wire.values(st, params), st.formats)
            if state.in_tx and state.begun:
                self._freeze_waiters_of(client)  # an error would end the transaction
            send(state, st.name, dumped, single_row=self.guard is not None)
        except psycopg.OperationalError as exc:
            raise self._lost(client, query, exc) from None
        state.since = time.monotonic()
        return self._adapted(client, state, self._outcome(client, state, query))

    def _adapted(self, client: str, state: _Client, outcome: Rows | Blocked) -> Rows | Blocked:
        """A user's queue's rows in the model's terms (sim.db.queue.adapter)."""
        if self._adapter is None or isinstance(outcome, Blocked):
            return outcome
        return self._adapter.rows(client, outcome, state.in_tx)

    def _prepare(self, state: _Client, st: wire.Statement, query: str) -> None:
        result = state.libpq().prepare(st.name, st.text, st.oids)
        if result.status != pq.ExecStatus.COMMAND_OK:
            raise self._error(query, result, False)
        state.prepared.add(st.name)

    def resume(self, client: str) -> Rows | Blocked:
        state = self._client(client, "resume")
        query = state.pending
        if query is None:
            raise ClientStateError(f"client {client} has no blocked statement to resume")
        state.pending = state.holder = None
        state.due = False
        if state.frozen:
            if state.in_tx:
                self._freeze_waiters_of(client)  # should its statement fail, they stay put
            self._thaw(state)
        return self._adapted(client, state, self._outcome(client, state, query))

    def _outcome(self, client: str, state: _Client, query: str) -> Rows | Blocked:
        try:
            holder = self._wait(client, state, query)
        except psycopg.OperationalError as exc:
            raise self._lost(client, query, exc) from None
        if holder is not None:
            self._waits += 1
            self.lock_waits.append((client, query, holder, self._locktype))
            state.pending, state.holder, state.order = query, holder, self._waits
            return Blocked(client, query, holder)
        deadlock, state.cancelled = state.cancelled, False
        stream = self._row_stream(state, query)
        try:
            result = collect(state, stream)
        except psycopg.OperationalError as exc:
            raise self._lost(client, query, exc) from None
        finally:
            if self.guard is not None:
                self.guard.budget.charge(time.monotonic() - state.since, self._where(query))
        if result.status in OK:
            return loaded_rows(state, result, stream.rows if stream else None)
        error = self._error(query, result, deadlock)
        if state.in_tx:
            self._holder_gone(client)  # the failed statement ended its transaction's locks
        raise error

    def _poll(self, state: _Client, timeout: float) -> bool:
        return poll(state, timeout)

    def _wait(self, client: str, state: _Client, query: str) -> str | None:
        """Wait until the statement finishes (None) or waits on a lock of an idle holder (its
        name)."""
        pause = FIRST_WAIT_S
        while not self._poll(state, pause):
            found = self._lock_holder(state.pid)
            if found is not None:
                holder, waiting = found
                locktype = self._locktype
                if not (waiting and self._waits_on(holder, state.pid)):
                    self._locktype = locktype
                    return self._pids[holder]
                self._cancel(state)
            if time.monotonic() - state.since > self._stuck_after:
                self.crash(client)
                if self._sandboxed is not None:  # the user's SQL: past its time limit
                    raise past_limit(self._where(query))
                raise StatementStuckError(
                    f"client {client}: {query} neither finished nor waited on another client's "
                    f"lock within {STATEMENT_TIMEOUT_S:.0f} s at {describe_dsn(self.dsn)}; "
                    "its connection was closed"
                )
            pause = min(pause * 2, MAX_WAIT_S)
        return None

    # ---- errors -------------------------------------------------------------------------------

    def _lost(self, client: str, query: str, exc: psycopg.Error) -> DatabaseError | ConfigError:
        """The client's connection broke under a statement: it is gone, as after a crash. When
        the queue's own SQL ended it (pg_terminate_backend), that is named instead."""
        state = self._clients.get(client)
        if state is not None and not state.crashed:
            with contextlib.suppress(DatabaseError):
                self._disconnect([state])
            state.crashed = True
        message = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        if self.guard is not None:
            ended = self.guard.ended(client, query, message)
            if ended is not None:
                return ended
        return unavailable(
            self.dsn, f"lost the connection of client {client} during {query} ({message})"
        )

    def _error(
        self, query: str, result: pq.abc.PGresult, deadlock: bool
    ) -> DatabaseError | ConfigError:
        sandbox = self._sandboxed
        return statement_error(
            query,
            result,
            deadlock,
            dsn=self.dsn,
            sandbox_role=sandbox.role if sandbox is not None else None,
            where=self._where(query) if sandbox is not None else "",
            guard=self.guard,
        )

    def _row_stream(self, state: _Client, query: str) -> RowStream | None:
        """A user's statement is read row by row, capped and timed (sim.db.queue.guard)."""
        guard = self.guard
        if guard is None:
            return None
        return RowStream(
            guard.row_cap,
            state.since + self._stuck_after,
            lambda: self.crash(self._pids.get(state.pid, "")),
            lambda: guard.too_many_rows(query),
            lambda: past_limit(self._where(query)),
        )

    def _where(self, query: str) -> str:
        """'file:line: name' of a statement of the user's queue, for a sandbox error."""
        assert self.queue is not None, "only a user's queue runs in a sandbox"
        return f"{self.queue.where(query)}: {query}"

    @property
    def _sandboxed(self) -> Sandbox | None:
        """The sandbox, when the statements are a user's (a queue), else None."""
        return self.run.sandboxed

    @property
    def _stuck_after(self) -> float:
        """Seconds a statement may run without waiting on another client's lock."""
        return self.run.stuck_after(STATEMENT_TIMEOUT_S)
