"""One live client's connection: runs named statements (text from the query loader) on the wall clock.

The statement texts come from one place, a `{name: Query}` mapping (sim.db.queries.load_queries()
by default), so a user's own queue directory only has to supply another mapping. `now` (and
`lease_until` = now + ttl) are bound from the shared LiveClock, as timestamptz = EPOCH + scenario
seconds, exactly as the simulated and the real-Postgres backends bind them; time values that come
back are turned into scenario seconds. A partition (the runner writes its end into the worker's
slot) drops the connection: statements fail until it heals (partition_mode fail) or wait for it (hang).
"""

from __future__ import annotations

import time
from datetime import datetime

import psycopg
from psycopg import sql

from sim.db.base import from_timestamp, to_timestamp
from sim.db.wire import statement, to_interval

APP_PREFIX = "leaselab-live:"  # application_name of every live client: prefix, schema, ':', client


class DbUnavailable(Exception):
    """The client cannot reach the database (a partition); its connection is gone."""


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
    ):
        self.dsn, self.schema, self.client = dsn, schema, client
        self.queries = queries
        self.clock = clock
        self.recorder = recorder
        self.slots, self.index, self.partition_mode = slots, index, partition_mode
        self.conn: psycopg.Connection | None = None

    def open(self) -> None:
        if self.conn is not None:
            return
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
        self.conn = conn

    def drop(self) -> None:
        """Close the connection abruptly (what a partition does to it)."""
        if self.conn is not None:
            self.conn.close()
            self.conn = None

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

    def run(
        self, name: str, params: dict, *, ttl: float | None = None, at: float | None = None
    ) -> list[tuple]:
        """Execute the named statement; its rows, times as scenario seconds (`at` overrides the clock)."""
        self._cross_partition()
        self.open()
        query = self.queries[name]
        if "now" in query.param_names:
            now = self.clock.now() if at is None else at
            params["now"] = now
            if ttl is not None:
                params["lease_until"] = now + ttl
        query.check(params)
        st = statement(query)
        bound = {
            k: to_timestamp(v) if k in st.times else to_interval(v) if k in st.intervals else v
            for k, v in params.items()
        }
        start = time.monotonic()
        try:
            cursor = self.conn.execute(query.sql, bound)
            rows = cursor.fetchall() if cursor.description is not None else []
        except psycopg.OperationalError:
            self.drop()
            raise DbUnavailable(name) from None
        self.recorder.statement(name, time.monotonic() - start)
        return [
            tuple(from_timestamp(v) if isinstance(v, datetime) else v for v in row) for row in rows
        ]

    def control(self, command: str) -> None:
        """BEGIN / COMMIT / ROLLBACK (transaction control, not a query)."""
        assert command in ("BEGIN", "COMMIT", "ROLLBACK")
        self._cross_partition()
        self.open()
        try:
            self.conn.execute(command)
        except psycopg.OperationalError:
            self.drop()
            raise DbUnavailable(command.lower()) from None

    def close(self) -> None:
        self.drop()
