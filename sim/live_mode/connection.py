"""One live client's connection: runs named statements (text from the query loader) on the wall
clock.

The statement texts come from one place, a `{name: Query}` mapping (sim.db.queries.load_queries() by
default), so a user's own queue directory only has to supply another mapping. `now` (and
`lease_until` = now + ttl) are bound from the shared LiveClock, as timestamptz = EPOCH + scenario
seconds, exactly as the simulated and the real-Postgres backends bind them; time values that come
back are turned into scenario seconds. A server error becomes a StatementError naming the statement,
a lost connection DbUnavailable (sim.db.errors), as the simulation sees them. A partition (the
runner writes its end into the worker's slot) drops the connection: statements fail until it heals
(partition_mode fail) or wait for it (hang).
"""

from __future__ import annotations

import os
import sys
import time
from datetime import datetime

import psycopg
from psycopg import sql

from sim.db.base import from_timestamp, to_timestamp
from sim.db.errors import DbUnavailable, StatementError
from sim.db.wire import statement, to_interval
from sim.errors import ConfigError
from sim.protocol import bind_clock

APP_PREFIX = "leaselab-live:"  # application_name of every live client: prefix, schema, ':', client
FATAL_EXIT = 3  # a child's exit code when the user's SQL hit the sandbox: the runner stops the run
CRASH_POINT_EXIT = 4  # a worker's exit code at a crash point (it logged the crash itself)
SHUTDOWN_EXIT = 5  # a worker's exit code after a graceful shutdown (it logged the shutdown)
IN_CHILD = False  # set by sim.live_mode.process: exit with FATAL_EXIT instead of raising SandboxHit


class SandboxHit(ConfigError):
    """In the runner's own process: a statement hit the sandbox of the user's SQL."""


class LiveConnection:
    def __init__(
        self,
        dsn: str,
        schema: str,
        client: str,
        queries: dict,
        clock,
        recorder,
        *,
        slots=None,
        index: int | None = None,
        partition_mode: str = "fail",
        skew: float = 0.0,
    ):
        self.dsn, self.schema, self.client = dsn, schema, client
        self.queries = queries
        self.clock = clock
        self.recorder = recorder
        self.slots, self.index, self.partition_mode = slots, index, partition_mode
        self.skew = skew  # the client's clock offset from the shared clock (policy.clock = worker)
        self.conn: psycopg.Connection | None = None
        self.pid: int | None = None  # its server backend's process id while connected

    def now(self) -> float:
        """This client's clock: the shared clock plus its offset (as the simulation's DbSession)."""
        return self.clock.now() + self.skew

    def settings(self) -> dict:
        """The keyword arguments that make another connection of the same client (a fresh one)."""
        return {
            "slots": self.slots,
            "index": self.index,
            "partition_mode": self.partition_mode,
            "skew": self.skew,
        }

    def open(self) -> psycopg.Connection:
        """The client's connection, opened if it has none."""
        if self.conn is not None:
            return self.conn
        conn = psycopg.connect(
            self.dsn,
            autocommit=True,
            application_name=f"{APP_PREFIX}{self.schema}:{self.client}",
            connect_timeout=10,
        )
        conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(self.schema)))
        conn.execute(
            "SET synchronous_commit TO off"
        )  # as PostgresBackend: atomic, visible, not flushed
        self.conn, self.pid = conn, conn.info.backend_pid
        return conn

    def drop(self) -> None:
        """Close the connection abruptly (what a partition does to it)."""
        if self.conn is not None:
            self.conn.close()
            self.conn = self.pid = None

    def _cross_partition(self) -> None:
        if self.slots is None:
            return
        end = self.slots.partitioned_until(self.index)
        if end <= self.clock.now():
            return
        self.drop()
        if self.partition_mode == "fail":
            raise DbUnavailable("partition")
        self.clock.sleep_until(end)

    def execute(
        self, name: str, params: dict, *, ttl: float | None = None, at: float | None = None
    ) -> list[tuple]:
        """Execute the named statement; its rows, times as scenario seconds (`at` overrides the
        clock)."""
        self._cross_partition()
        conn = self.open()
        query = self.queries[name]
        if query.uses_clock:
            bind_clock(params, self.now() if at is None else at, ttl)
        query.check(params)
        st = statement(query)
        bound = {
            k: to_timestamp(v) if k in st.times else to_interval(v) if k in st.intervals else v
            for k, v in params.items()
        }
        start = time.monotonic()
        began = getattr(self.recorder, "began", None)
        if began is not None:  # the time-scale guard's probe: what is in flight, and since when
            began(name, start)
        try:
            cursor = conn.execute(query.sql, bound)
            rows = cursor.fetchall() if cursor.description is not None else []
        except (psycopg.errors.QueryCanceled, psycopg.errors.InsufficientPrivilege) as exc:
            _stop_the_run(name, exc)
        except psycopg.OperationalError:
            self.drop()
            raise DbUnavailable(name) from None
        except psycopg.Error as exc:
            raise StatementError(name, str(exc).strip()) from exc
        self.recorder.statement(name, time.monotonic() - start)
        return [
            tuple(from_timestamp(v) if isinstance(v, datetime) else v for v in row) for row in rows
        ]

    def control(self, command: str) -> None:
        """BEGIN / COMMIT / ROLLBACK (transaction control, not a query)."""
        assert command in ("BEGIN", "COMMIT", "ROLLBACK")
        self._cross_partition()
        conn = self.open()
        try:
            conn.execute(command)
        except psycopg.OperationalError:
            self.drop()
            raise DbUnavailable(command.lower()) from None
        except psycopg.Error as exc:
            raise StatementError(command, str(exc).strip()) from exc

    def abort(self) -> None:
        """ROLLBACK whatever is open; a connection that cannot even do that is dropped (the server
        rolls back then). Never raises: after a failure there is nothing else to do."""
        try:
            self.control("ROLLBACK")
        except (StatementError, DbUnavailable):
            self.drop()

    def close(self) -> None:
        self.drop()

    def terminate(self, pids: list[int]) -> None:
        """End the server backends `pids` (this client's other connections, which a shutting-down
        worker leaves mid-transaction): the server rolls back what they held, as at a crash."""
        self.open().execute(
            "SELECT pg_terminate_backend(pid) FROM unnest(%s::int[]) AS t(pid)", (pids,)
        )


def _stop_the_run(name: str, exc: psycopg.Error) -> None:
    """The statement hit the sandbox of the user's SQL (sim.db.queue.sandbox): its time limit, or a
    privilege the run's role lacks. Not a database outage to live through: say so in one line
    and exit with FATAL_EXIT, from whichever thread, so that the runner stops the run (in the
    runner itself: raise SandboxHit)."""
    from sim.scenario.limits import statement_timeout_words

    message = " ".join(str(exc).split())
    if isinstance(exc, psycopg.errors.QueryCanceled):
        line = f"{name}: cancelled by PostgreSQL ({message}) at {statement_timeout_words()}"
    else:
        line = (
            f"{name}: PostgreSQL refused it to the run's role: {message}; a queue's SQL may "
            "touch only the run's own schema"
        )
    if not IN_CHILD:
        raise SandboxHit(line)
    sys.stderr.write(line + "\n")
    sys.stderr.flush()
    os._exit(FATAL_EXIT)
