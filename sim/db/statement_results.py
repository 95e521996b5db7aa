"""A statement's result off a client's libpq connection (sim.db.postgres): polling the socket,
collecting the result (after a piped BEGIN's, or row by row for a user's queue), loading its rows,
and naming a server error by Lease Lab's error classes."""

from __future__ import annotations

import os
import select
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import psycopg
from psycopg import pq

from sim.db.base import Rows
from sim.db.errors import (
    DatabaseError,
    DeadlockDetectedError,
    LockNotAvailableError,
    ServerStatementError,
    TransactionAbortedError,
    UniqueViolationError,
)
from sim.db.lock_waits import MAX_WAIT_S, _Client
from sim.db.queue.guard import QueueGuard
from sim.db.queue.sandbox import SandboxRefused, past_limit, timed_out
from sim.db.server import unavailable
from sim.errors import ConfigError

if TYPE_CHECKING:
    from psycopg.abc import Buffer

SPIN_S = 0.0002  # poll the socket this long before sleeping on it
OK = (pq.ExecStatus.TUPLES_OK, pq.ExecStatus.COMMAND_OK)
_SQLSTATE = pq.DiagnosticField.SQLSTATE
_PRIMARY = pq.DiagnosticField.MESSAGE_PRIMARY
_yield = getattr(os, "sched_yield", lambda: None)


@dataclass
class RowStream:
    """A user's statement read row by row (single-row mode): past `row_cap` rows or `deadline`
    (time.monotonic()) its client is crashed (`stop`) and the error `too_many()` or `late()`
    raised; the server's own timeout may have been turned off."""

    row_cap: int
    deadline: float
    stop: Callable[[], None]
    too_many: Callable[[], Exception]
    late: Callable[[], Exception]
    rows: Rows = field(default_factory=list)

    def next_result(self, state: _Client) -> pq.abc.PGresult | None:
        pg = state.libpq()
        pg.consume_input()
        while pg.is_busy():
            if time.monotonic() > self.deadline:
                self.stop()
                raise self.late()
            select.select([state.fd], [], [], MAX_WAIT_S)
            pg.consume_input()
        return pg.get_result()

    def add(self, state: _Client, result: pq.abc.PGresult) -> None:
        if len(self.rows) >= self.row_cap:
            self.stop()
            raise self.too_many()
        tx = state.transformer()
        tx.set_pgresult(result, format=pq.Format.BINARY)
        self.rows.append(tx.load_row(0, tuple))


def poll(state: _Client, timeout: float) -> bool:
    """Has the statement in flight finished? Waits up to `timeout` seconds for it: first polling
    the socket (a typical statement answers within tens of microseconds, sooner than the scheduler
    would wake a sleeping process), then sleeping in select()."""
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


def send(state: _Client, name: bytes, dumped: Sequence[Buffer | None], *, single_row: bool) -> None:
    """Send the prepared statement `name` with its dumped parameters; in an open transaction whose
    BEGIN has not gone out yet, both travel in one pipeline (one round trip). `single_row`: its
    rows are to be read one by one (RowStream)."""
    pg = state.libpq()
    state.piped = state.in_tx and not state.begun
    if state.piped:
        pg.enter_pipeline_mode()
        pg.send_query_params(b"BEGIN", None)
        pg.send_query_prepared(name, dumped, result_format=1)
        pg.pipeline_sync()
        state.begun = True
    else:
        pg.send_query_prepared(name, dumped, result_format=1)
        if single_row:
            pg.set_single_row_mode()
    pg.flush()


def collect(state: _Client, stream: RowStream | None = None) -> pq.abc.PGresult:
    """The statement's result (after its BEGIN's, when piped); the connection is idle after.
    `stream` (a user's queue): the statement runs in single-row mode and its rows are loaded into
    the stream as they come."""
    pg = state.libpq()
    if state.piped:
        results: list[pq.abc.PGresult] = []
        gaps = 0
        while True:
            result = stream.next_result(state) if stream is not None else pg.get_result()
            if result is None:  # one between the results of two statements; more: trouble
                gaps += 1
                if gaps > 2 or pg.status == pq.ConnStatus.BAD:
                    raise psycopg.OperationalError(
                        pg.error_message.decode(errors="replace") or "connection lost"
                    )
                if stream is not None and gaps == 1 and len(results) == 1:
                    pg.set_single_row_mode()  # BEGIN's results are read: the statement's next
                continue
            gaps = 0
            if result.status == pq.ExecStatus.PIPELINE_SYNC:
                break
            if result.status == pq.ExecStatus.SINGLE_TUPLE and stream is not None:
                stream.add(state, result)
                continue
            results.append(result)
        pg.exit_pipeline_mode()
        state.piped = False
        failed = [r for r in results if r.status not in OK]
        return failed[0] if failed else results[-1]
    if stream is not None:
        result = stream.next_result(state)
        while result is not None and result.status == pq.ExecStatus.SINGLE_TUPLE:
            stream.add(state, result)
            result = stream.next_result(state)
    else:
        result = pg.get_result()
    while pg.get_result() is not None:
        pass
    if result is None or pg.status == pq.ConnStatus.BAD:
        message = result.error_message if result is not None else pg.error_message
        raise psycopg.OperationalError(message.decode(errors="replace") or "connection lost")
    return result


def loaded_rows(state: _Client, result: pq.abc.PGresult, streamed: Rows | None) -> Rows:
    """The rows of a statement that succeeded: those streamed, or those of its result."""
    if streamed:
        return streamed
    if result.ntuples == 0:
        return []
    tx = state.transformer()
    tx.set_pgresult(result, format=pq.Format.BINARY)
    return tx.load_rows(0, result.ntuples, tuple)


def statement_error(
    query: str,
    result: pq.abc.PGresult,
    deadlock: bool,
    *,
    dsn: str,
    sandbox_role: str | None,
    where: str,
    guard: QueueGuard | None,
) -> DatabaseError | ConfigError:
    """Lease Lab's error for a statement PostgreSQL failed. `deadlock`: the driver cancelled it to
    break a cycle of waits. `sandbox_role` (a user's queue, `where` its statement): the user's SQL
    hit the sandbox (a privilege the run's role lacks, or the time limit): a ConfigError, which
    the model does not take for a database failure it lives through."""
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
        return unavailable(dsn, f"lost the connection during {query} ({message})")
    if sandbox_role is not None and sqlstate == "42501":
        return SandboxRefused(
            f"{where}: PostgreSQL refused it to the run's role {sandbox_role}: {message}; "
            "a queue's SQL (its statements, and the triggers and functions they call) may "
            "touch only the run's own schema"
        )
    if sandbox_role is not None and timed_out(sqlstate):
        return past_limit(where)
    if guard is not None:
        guard.failed(query, sqlstate, message)
    return ServerStatementError(query, message, sqlstate)
