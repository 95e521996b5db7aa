"""How PostgresBackend puts a named query on the wire: `$n` placeholders, parameter order and
types (a prepared statement, parameters bound separately, never formatted into SQL), and
timestamptz read back as simulated seconds."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cache

from psycopg import pq
from psycopg.adapt import Loader, PyFormat

from sim.db.base import EPOCH, MICROS
from sim.db.queries import PLACEHOLDER, Query

_OIDS = {"int": 20, "text": 25, "bool": 16, "time": 1184}  # int8, text, bool, timestamptz
_PG_EPOCH_US = (EPOCH - datetime(2000, 1, 1, tzinfo=UTC)).days * 86_400 * MICROS


class SimTimeLoader(Loader):
    """timestamptz (binary: microseconds since 2000-01-01) -> simulated seconds,
    like MemoryBackend."""

    format = pq.Format.BINARY

    def load(self, data) -> float:
        return (int.from_bytes(data, "big", signed=True) - _PG_EPOCH_US) / MICROS


@dataclass(frozen=True)
class Statement:
    """A named query as the wire sees it: $n placeholders, parameter order and types."""

    name: bytes
    text: bytes
    order: tuple[str, ...]
    times: frozenset[str]
    oids: tuple[int, ...]
    formats: tuple[PyFormat, ...]


@cache
def statement(q: Query) -> Statement:
    order: list[str] = []
    kinds = dict(q.params)

    def number(match: re.Match) -> str:
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
        oids=tuple(_OIDS[kinds[n]] for n in order),
        formats=(PyFormat.TEXT,) * len(order),
    )
