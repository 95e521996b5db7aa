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
import os
import secrets
import select
import signal
import time

import psycopg
from psycopg import pq, sql
from psycopg.adapt import Transformer

from sim.db import wire
from sim.db.base import Blocked, ClientTable, Rows
from sim.db.errors import (
    ClientStateError,
    DatabaseError,
    DeadlockDetectedError,
    LockNotAvailableError,
    StatementError,
    TransactionAbortedError,
    UniqueViolationError,
)
from sim.db.lock_waits import FIRST_WAIT_S, MAX_WAIT_S, LockWaits, _Client
from sim.db.processes import may_signal
from sim.db.queries import bookkeeping_sql, get_query, job_schema_sql, load_queries, schema_sql
from sim.db.queue.adapter import QueueAdapter
from sim.db.queue.directory import SCHEMA_FILE, QueueDefinition
from sim.db.queue.guard import QueueGuard
from sim.db.queue.sandbox import (
    Sandbox,
    SandboxRefused,
    admin_session,
    close_reader,
    create_bookkeeping,
    kept_reader,
    past_limit,
    timed_out,
)
from sim.db.queue.sandbox import create as create_sandbox
from sim.db.queue.user_sql import run_schema, settings_of
from sim.db.server import (
    connect_dsn,
    connection_error,
    describe_dsn,
    open_connection,
    redact_dsn,
    unavailable,
)
from sim.errors import ConfigError

log = logging.getLogger(__name__)

SPIN_S = 0.0002  # poll the socket this long before sleeping on it
STATEMENT_TIMEOUT_S = 60.0  # a statement neither finished nor waiting on a client: give up
TERMINATE_TIMEOUT_S = 10.0
THAW_WATCHDOG_S = 1.0  # a transaction end taking this long with waiters paused: let them go
# A paused waiter must be asleep in its lock wait, not inside PostgreSQL's deadlock check (which
# holds the lock manager's locks): where allowed, client sessions push that check far away. The
# driver breaks cycles of waits itself (see `_wait`).
CLIENT_DEADLOCK_TIMEOUT = "10min"

# Server administration, not simulation queries (those all come from sql/queries.sql).
_TERMINATE = "SELECT pg_terminate_backend(pid) FROM unnest(%s::int[]) AS t(pid)"
_ALIVE = "SELECT count(*) FROM pg_stat_activity WHERE pid = ANY(%s::int[])"

_yield = getattr(os, "sched_yield", lambda: None)
_OK = (pq.ExecStatus.TUPLES_OK, pq.ExecStatus.COMMAND_OK)
_SQLSTATE = pq.DiagnosticField.SQLSTATE
_PRIMARY = pq.DiagnosticField.MESSAGE_PRIMARY


class StatementStuckError(DatabaseError):
    """A statement neither finished nor waited on another client's lock within the timeout."""


class ServerStatementError(StatementError):
    """Any other error PostgreSQL reported for a statement, with its own SQLSTATE."""

    def __init__(self, query: str, message: str, sqlstate: str):
        self.sqlstate = sqlstate
        super().__init__(query, message)
        self.args = (query, message, sqlstate)


READER_TIMEOUT_MS = 10_000  # run_sql(read_only=True): a reader's statement may take this long


class PostgresBackend(LockWaits, ClientTable):
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
        self._monitor = open_connection(
            self.dsn, autocommit=True, application_name="leaselab:monitor"
        )
        admin_session(self._monitor)
        # a user's queue: rows per statement capped, total time bounded, errors counted
        self.guard = QueueGuard(queue) if queue is not None else None
        self._reader: Sandbox | None = None  # attached to a kept sandbox: its role reads
        self._settings: bytes | None = None  # the run role's settings (catalog), to keep
        self._closed = False
        self.sandbox: Sandbox | None = None  # the run's schema and the role the user's SQL runs as
        try:
            [(rolsuper,)] = self._monitor.execute(
                "SELECT rolsuper FROM pg_roles WHERE rolname = current_user"
            ).fetchall()
            self._superuser = rolsuper is True
            if _existing:
                self._find_schema()
            else:
                self._create_schema()
        except BaseException:
            if self.sandbox is not None:
                with contextlib.suppress(Exception):
                    self.sandbox.drop(self._monitor)
            self._monitor.close()
            raise
        self.pauses_waiters = may_signal(self._monitor, self._monitor.info.backend_pid)
        atexit.register(self.close)  # a backend never closed still drops its schema at exit
        if not self.pauses_waiters:
            log.info(
                "server at %s is not local: lock waiters are settled in order without pausing "
                "them, and PostgreSQL may reorder two waiters on one row",
                describe_dsn(self.dsn),
            )

    @property
    def client_dsn(self) -> str:
        """The DSN a client of this run connects with: the run's role for a user's queue
        (sim.db.queue.sandbox), else the DSN itself. It may hold the role's one-run password."""
        if self.sandbox is not None:
            return self.sandbox.dsn
        return self._reader.dsn if self._reader is not None else self.dsn

    @property
    def statement_errors(self) -> list[dict]:
        """Each distinct error of the queue's statements, counted (sim.db.queue.guard)."""
        return self.guard.report() if self.guard is not None else []

    @classmethod
    def attach(cls, dsn: str | None, schema: str) -> PostgresBackend:
        """A backend on the tables of an existing schema (one a run kept for inspection):
        nothing is created, and closing it leaves the schema in place."""
        return cls(dsn, schema=schema, _existing=True)

    def _find_schema(self) -> None:
        try:
            [(found,)] = self._monitor.execute(
                "SELECT count(*) FROM pg_tables WHERE schemaname = %s AND tablename = 'ledger'",
                (self.schema,),
            ).fetchall()
        except psycopg.OperationalError as exc:
            raise connection_error(self.dsn, exc) from None
        if not found:
            raise DatabaseError(
                f"no Lease Lab schema {self.schema} at {describe_dsn(self.dsn)}; "
                "list the kept ones with SELECT nspname FROM pg_namespace "
                "WHERE nspname LIKE 'leaselab_%'"
            )
        self._reader = kept_reader(self._monitor, self.dsn, self.schema)

    def __repr__(self) -> str:
        return f"PostgresBackend({redact_dsn(self.dsn)!r}, schema={self.schema!r})"

    def _create_schema(self) -> None:
        """The run's schema (for a user's queue: owned by a role of the run's own, which every
        client logs in as; see sim.db.queue.sandbox), with Lease Lab's tables and the job table."""
        settings = {"deadlock_timeout": CLIENT_DEADLOCK_TIMEOUT} if self._superuser else {}
        self.sandbox = create_sandbox(
            self._monitor,
            self.dsn,
            schema=self.schema,
            own_rights=self.queue is None or self.queue.own_rights,
            user_sql=self.queue is not None,
            keep=self.keep_schema,
            role_settings=settings,
        )
        if self.sandbox.role is not None:  # Lease Lab's own tables: out of the role's reach
            create_bookkeeping(self._monitor, self.sandbox, bookkeeping_sql())
        conn = self.sandbox.connect(application_name="leaselab:schema")
        try:
            with conn.transaction():
                if self.sandbox.role is not None:
                    self._settings = settings_of(conn.pgconn)  # the role's, as Lease Lab set them
                if self.queue is None:
                    conn.execute(schema_sql())
                else:
                    if self.sandbox.role is None:
                        conn.execute(bookkeeping_sql())
                    if self.queue.job_schema is None:
                        conn.execute(job_schema_sql())
                    else:
                        run_schema(
                            conn.pgconn,
                            self.queue.job_schema,
                            self.queue.file(SCHEMA_FILE),
                            self.sandbox.limit,
                            self.guard.budget if self.guard is not None else None,
                        )
        except psycopg.OperationalError as exc:
            raise connection_error(self.dsn, exc) from None
        except psycopg.Error as exc:  # the check passed it: the server changed in between
            raise DatabaseError(
                f"PostgreSQL at {describe_dsn(self.dsn)} refused the schema of the run: "
                f"{' '.join(str(exc).split())}"
            ) from None
        finally:
            conn.close()
        log.info("created schema %s at %s", self.schema, redact_dsn(self.dsn))

    # ---- connections and transactions -------------------------------------------------------

    def _open(self, client: str, state: _Client) -> None:
        """Open the client's connection on first use, with the search_path of this run's schema."""
        if state.conn is not None:
            return
        if self._closed:
            raise ClientStateError(f"the backend is closed: client {client} cannot connect")
        conn = open_connection(
            self.client_dsn, autocommit=True, application_name=f"leaselab:{client}"
        )
        try:
            conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(self.schema)))
            # Commits stay atomic and immediately visible; only their survival of a server crash,
            # which Lease Lab never simulates, is given up for not waiting on a WAL flush each time.
            conn.execute("SET synchronous_commit TO off")
            conn.execute("SET TimeZone TO 'UTC'")  # a queue's timestamp columns hold UTC
            if self._superuser and self._sandboxed is None and self._reader is None:
                conn.execute(
                    sql.SQL("SET deadlock_timeout TO {}").format(
                        sql.Literal(CLIENT_DEADLOCK_TIMEOUT)
                    )
                )
            wire.register_loaders(conn)
            signals = self.pauses_waiters and may_signal(conn, conn.info.backend_pid)
            if self._settings is not None and settings_of(conn.pgconn) != self._settings:
                conn.close()
                raise self.guard.settings_changed() if self.guard else ClientStateError(client)
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
        result = self._collect(state)
        if result.status not in _OK:
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
        try:
            try:
                self._release()
            except (psycopg.Error, DatabaseError):
                # A Ctrl-C or SIGTERM that cancelled a monitor statement can leave the monitor
                # closed, or its cancel land on the next statement: release on a fresh connection.
                self._monitor.close()
                self._monitor = open_connection(
                    self.dsn, autocommit=True, application_name="leaselab:monitor"
                )
                admin_session(self._monitor)
                self._release()
        finally:
            self._monitor.close()

    def _release(self) -> None:
        """End the clients' server processes, then drop the run's schema and role (or keep the
        schema). Safe to call again after a failure part way."""
        self._disconnect(list(self._clients.values()))
        self._clients.clear()
        if self.sandbox is None:  # attached to a kept schema: it stays, unless keep_schema=False
            reader, self._reader = self._reader, None
            if reader is not None:
                close_reader(self._monitor, reader)
            if self.keep_schema:
                log.info("kept schema %s at %s", self.schema, redact_dsn(self.dsn))
            else:  # the schema and the role that owns it go (it was kept for this inspection)
                Sandbox(self.dsn, self.schema, reader.role if reader else None).drop(self._monitor)
        else:
            self.sandbox.drop(self._monitor, keep_schema=self.keep_schema)
            if self.keep_schema:
                log.info("kept schema %s at %s", self.schema, redact_dsn(self.dsn))

    def __enter__(self) -> PostgresBackend:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _disconnect(self, states: list[_Client]) -> None:
        """Kill the clients' server processes (PostgreSQL rolls back and releases their locks,
        abandoning any statement they were waiting in), then close their sockets."""
        opened = [s for s in states if s.conn is not None]
        for state in opened:
            self._thaw(state)
            if state.signals:  # even if a Ctrl-C fell between a pause and its bookkeeping
                with contextlib.suppress(OSError):
                    os.kill(state.pid, signal.SIGCONT)
        pids = [s.pid for s in opened]
        if pids:
            self.admin(_TERMINATE, (pids,))
            self._await_exit(pids)
        for state in opened:
            with contextlib.suppress(Exception):
                if state.conn is not None:  # an opened client's, always
                    state.conn.close()
            self._pids.pop(state.pid, None)
            state.conn, state.pg, state.tx, state.pid, state.fd = None, None, None, 0, -1
        for state in states:
            state.in_tx = state.begun = state.piped = state.cancelled = False
            state.pending = state.holder = None

    def _await_exit(self, pids: list[int]) -> None:
        """Return once the server processes are gone: their transactions have been rolled back."""
        deadline = time.monotonic() + TERMINATE_TIMEOUT_S
        while self.admin(_ALIVE, (pids,))[0][0]:
            if time.monotonic() > deadline:
                raise StatementStuckError(
                    f"server processes {pids} at {describe_dsn(self.dsn)} did not exit "
                    f"within {TERMINATE_TIMEOUT_S:.0f} s of pg_terminate_backend"
                )
            time.sleep(0.0005)

    def admin(self, statement, params: tuple | dict | None = None) -> list[tuple]:
        """Run a server administration statement (a catalog read, pg_terminate_backend) on the
        monitor connection: its rows. Live mode watches and sizes the server through it."""
        try:
            cur = self._monitor.execute(statement, params)
        except psycopg.OperationalError as exc:
            raise connection_error(self.dsn, exc) from None
        return cur.fetchall() if cur.description else []

    def run_sql(
        self, text: str, params=None, *, read_only: bool = False
    ) -> tuple[list[str], list[tuple]]:
        """Run SQL text (an operator's or a reader's, not a named query) in this backend's schema
        on its monitor connection: (column names, rows), times as timestamptz. It runs in a
        transaction of its own, rolled back if it fails. read_only (a reader's answer to an
        exercise): the text must be one statement (it is prepared on the server), runs in a READ
        ONLY transaction with a statement timeout, and is rolled back whatever it did; PostgreSQL
        refuses a write (25006)."""
        box = self._sandboxed or self._reader  # a queue's objects: read as its role, never ours
        if box is None:
            return self._run_sql_on(self._monitor, text, params, read_only)
        conn = box.connect(application_name="leaselab:sql")
        try:
            return self._run_sql_on(conn, text, params, read_only)
        finally:
            conn.close()

    def _run_sql_on(
        self, conn: psycopg.Connection, text: str, params, read_only: bool
    ) -> tuple[list[str], list[tuple]]:
        with conn.transaction(force_rollback=read_only):
            if read_only:
                conn.execute("SET TRANSACTION READ ONLY")
                conn.execute(
                    "SELECT set_config('statement_timeout', %s, true)", (str(READER_TIMEOUT_MS),)
                )
            conn.execute(sql.SQL("SET LOCAL search_path TO {}").format(sql.Identifier(self.schema)))
            cur = conn.execute(text, params, prepare=True if read_only else None)
            if cur.description is None:
                return [], []
            return [d.name for d in cur.description], cur.fetchall()

    # ---- statements ---------------------------------------------------------------------------

    def execute(self, client: str, query: str, params: dict) -> Rows | Blocked:
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
        pg = state.libpq()
        try:
            if st.name not in state.prepared:
                self._prepare(state, st, query)
            dumped = state.transformer().dump_sequence(wire.values(st, params), st.formats)
            if state.in_tx and state.begun:
                self._freeze_waiters_of(client)  # an error would end the transaction
            state.piped = state.in_tx and not state.begun
            if state.piped:
                pg.enter_pipeline_mode()
                pg.send_query_params(b"BEGIN", None)
                pg.send_query_prepared(st.name, dumped, result_format=1)
                pg.pipeline_sync()
                state.begun = True
            else:
                pg.send_query_prepared(st.name, dumped, result_format=1)
                if self.guard is not None:
                    pg.set_single_row_mode()
            pg.flush()
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
        streamed: list[tuple] | None = [] if self.guard is not None else None
        try:
            result = self._collect(state, streamed, query)
        except psycopg.OperationalError as exc:
            raise self._lost(client, query, exc) from None
        finally:
            if self.guard is not None:
                self.guard.budget.charge(time.monotonic() - state.since, self._where(query))
        if result.status in _OK:
            if streamed:
                return streamed
            if result.ntuples == 0:
                return []
            tx = state.transformer()
            tx.set_pgresult(result, format=pq.Format.BINARY)
            return tx.load_rows(0, result.ntuples, tuple)
        error = self._error(query, result, deadlock)
        if state.in_tx:
            self._holder_gone(client)  # the failed statement ended its transaction's locks
        raise error

    def _poll(self, state: _Client, timeout: float) -> bool:
        """Has the statement in flight finished? Waits up to `timeout` seconds for it: first
        polling the socket (a typical statement answers within tens of microseconds, sooner than
        the scheduler would wake a sleeping process), then sleeping in select()."""
        pg = state.libpq()
        pg.consume_input()
        if not pg.is_busy():
            return True
        now = time.perf_counter()
        spin = now + min(SPIN_S, timeout)
        while now < spin:
            _yield()  # should the server share our CPU, let it run
            pg.consume_input()
            if not pg.is_busy():
                return True
            now = time.perf_counter()
        end = time.monotonic() + timeout - SPIN_S
        while True:
            left = end - time.monotonic()
            if left <= 0 or not select.select([state.fd], [], [], left)[0]:
                return False
            pg.consume_input()
            if not pg.is_busy():
                return True

    def _collect(
        self, state: _Client, streamed: list[tuple] | None = None, query: str = ""
    ) -> pq.abc.PGresult:
        """The statement's result (after its BEGIN's, when piped); the connection is idle after.
        `streamed` (a user's queue): the statement runs in single-row mode and its rows are
        loaded into that list as they come, up to the guard's cap."""
        pg = state.libpq()
        if state.piped:
            results: list[pq.abc.PGresult] = []
            gaps = 0
            while True:
                if streamed is not None:
                    result = self._next_result(state, query)
                else:
                    result = pg.get_result()
                if result is None:  # one between the results of two statements; more: trouble
                    gaps += 1
                    if gaps > 2 or pg.status == pq.ConnStatus.BAD:
                        raise psycopg.OperationalError(
                            pg.error_message.decode(errors="replace") or "connection lost"
                        )
                    if streamed is not None and gaps == 1 and len(results) == 1:
                        pg.set_single_row_mode()  # BEGIN's results are read: the statement's next
                    continue
                gaps = 0
                if result.status == pq.ExecStatus.PIPELINE_SYNC:
                    break
                if result.status == pq.ExecStatus.SINGLE_TUPLE and streamed is not None:
                    self._stream_row(state, result, streamed, query)
                    continue
                results.append(result)
            pg.exit_pipeline_mode()
            state.piped = False
            failed = [r for r in results if r.status not in _OK]
            return failed[0] if failed else results[-1]
        if streamed is not None:
            result = self._next_result(state, query)
            while result is not None and result.status == pq.ExecStatus.SINGLE_TUPLE:
                self._stream_row(state, result, streamed, query)
                result = self._next_result(state, query)
        else:
            result = pg.get_result()
        while pg.get_result() is not None:
            pass
        if result is None or pg.status == pq.ConnStatus.BAD:
            message = result.error_message if result is not None else pg.error_message
            raise psycopg.OperationalError(message.decode(errors="replace") or "connection lost")
        return result

    def _next_result(self, state: _Client, query: str) -> pq.abc.PGresult | None:
        """The next result of a user's statement, waiting no longer than its time limit (rows in
        single-row mode come one by one; the server's own timeout may have been turned off)."""
        pg = state.libpq()
        pg.consume_input()
        while pg.is_busy():
            if time.monotonic() - state.since > self._stuck_after:
                self.crash(self._pids.get(state.pid, ""))
                raise past_limit(self._where(query))
            select.select([state.fd], [], [], MAX_WAIT_S)
            pg.consume_input()
        return pg.get_result()

    def _stream_row(
        self, state: _Client, result: pq.abc.PGresult, rows: list[tuple], query: str
    ) -> None:
        """One row of a user's statement in single-row mode; past the guard's cap the statement
        is cancelled (its connection closed) and TooManyRows names it."""
        assert self.guard is not None, "rows are streamed for a user's queue only"
        if len(rows) >= self.guard.row_cap:
            self.crash(self._pids.get(state.pid, ""))
            raise self.guard.too_many_rows(query)
        tx = state.transformer()
        tx.set_pgresult(result, format=pq.Format.BINARY)
        rows.append(tx.load_row(0, tuple))

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
        sqlstate = (result.error_field(_SQLSTATE) or b"").decode()
        message = (result.error_field(_PRIMARY) or result.error_message or b"").decode().strip()
        if sqlstate == "40P01" or (deadlock and sqlstate == "57014"):
            return DeadlockDetectedError(query, "deadlock detected")
        if sqlstate == "55P03":
            return LockNotAvailableError(query, message)
        if sqlstate == "25P02":
            return TransactionAbortedError(query, message)
        if sqlstate == "23505":
            return UniqueViolationError(query, message)
        if not sqlstate:
            return unavailable(self.dsn, f"lost the connection during {query} ({message})")
        sandbox = self._sandboxed
        if sandbox is not None and (sqlstate == "42501" or timed_out(sqlstate)):
            return self._sandbox_error(sandbox, query, message, sqlstate)
        if self.guard is not None:
            self.guard.failed(query, sqlstate, message)
        return ServerStatementError(query, message, sqlstate)

    def _sandbox_error(
        self, sandbox: Sandbox, query: str, message: str, sqlstate: str
    ) -> ConfigError:
        """The user's SQL hit the sandbox (a privilege the run's role lacks, or the time limit):
        a ConfigError, which the model does not take for a database failure it lives through."""
        where = self._where(query)
        if sqlstate == "42501":
            return SandboxRefused(
                f"{where}: PostgreSQL refused it to the run's role {sandbox.role}: {message}; "
                "a queue's SQL (its statements, and the triggers and functions they call) may "
                "touch only the run's own schema"
            )
        return past_limit(where)

    def _where(self, query: str) -> str:
        """'file:line: name' of a statement of the user's queue, for a sandbox error."""
        assert self.queue is not None, "only a user's queue runs in a sandbox"
        return f"{self.queue.where(query)}: {query}"

    @property
    def _sandboxed(self) -> Sandbox | None:
        """The sandbox, when the statements are a user's (a queue), else None."""
        return self.sandbox if self.queue is not None and self.sandbox is not None else None

    @property
    def _stuck_after(self) -> float:
        """Seconds a statement may run without waiting on another client's lock."""
        sandbox = self._sandboxed
        if sandbox is not None and sandbox.limit is not None:
            return sandbox.limit + 1.0  # the server's statement_timeout speaks first
        return STATEMENT_TIMEOUT_S
