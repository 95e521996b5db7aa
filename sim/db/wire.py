"""How PostgresBackend puts a named query on the wire: `$n` placeholders, parameter order and
types (a prepared statement, parameters bound separately, never formatted into SQL), and
timestamptz read back as simulated seconds."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import cache
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg import pq
from psycopg.adapt import Loader, PyFormat

from sim.db.base import EPOCH, MICROS, to_micros, to_timestamp
from sim.db.queries import PLACEHOLDER, Query

if TYPE_CHECKING:
    from psycopg.abc import Buffer

_OIDS = {"int": 20, "text": 25, "bool": 16, "time": 1184, "interval": 1186}
_PG_EPOCH_US = (EPOCH - datetime(2000, 1, 1, tzinfo=UTC)).days * 86_400 * MICROS


class SimTimeLoader(Loader):
    """timestamptz (binary: microseconds since 2000-01-01) -> simulated seconds, like MemoryBackend.
    Registered for timestamp without time zone too, read as UTC: the connections of a run set
    TimeZone to UTC, so a queue's timestamp columns hold the simulated clock in UTC."""

    format = pq.Format.BINARY

    def load(self, data: Buffer) -> float:
        return (int.from_bytes(data, "big", signed=True) - _PG_EPOCH_US) / MICROS


@dataclass(frozen=True)
class Statement:
    """A named query as the wire sees it: $n placeholders, parameter order and types."""

    name: bytes
    text: bytes
    order: tuple[str, ...]
    times: frozenset[str]
    intervals: frozenset[str]
    oids: tuple[int, ...]
    formats: tuple[PyFormat, ...]


@cache
def statement(q: Query, id_oid: int = _OIDS["int"]) -> Statement:
    """`q` on the wire; `id_oid`: the type of the queue's job ids, which %(id)s is bound as (the
    model's job number in insert_job, which gives the job its id)."""
    order: list[str] = []
    kinds = dict(q.params)

    def number(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in order:
            order.append(name)
        return f"${order.index(name) + 1}"

    text = PLACEHOLDER.sub(number, q.sql)
    return Statement(
        name=f"leaselab_{q.name}".encode(),
        text=text.encode(),
        order=tuple(order),
        times=frozenset(n for n in order if kinds[n] == "time"),
        intervals=frozenset(n for n in order if kinds[n] == "interval"),
        oids=tuple(
            id_oid if n == "id" and q.name != "insert_job" else _OIDS[kinds[n]] for n in order
        ),
        formats=(PyFormat.TEXT,) * len(order),
    )


def values(st: Statement, params: dict[str, Any]) -> list[Any]:
    """The statement's parameters in wire order: times (simulated seconds) as timestamptz,
    intervals (seconds) as interval."""
    return [
        to_timestamp(params[n])
        if n in st.times
        else to_interval(params[n])
        if n in st.intervals
        else params[n]
        for n in st.order
    ]


def to_interval(seconds: float) -> timedelta:
    return timedelta(microseconds=to_micros(seconds))


def register_loaders(conn: psycopg.Connection[Any]) -> None:
    """Times come back as simulated seconds, from timestamptz and timestamp columns alike."""
    conn.adapters.register_loader("timestamptz", SimTimeLoader)
    conn.adapters.register_loader("timestamp", SimTimeLoader)
