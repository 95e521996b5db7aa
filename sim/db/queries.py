"""Named queries loaded from sql/queries.sql: the single source of SQL text in Lease Lab."""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from functools import cache, cached_property
from importlib import resources
from typing import Any

from sim.db.errors import ParameterError, UnknownQueryError

PARAM_TYPES: dict[str, frozenset[type]] = {  # exact classes: True is not an int here
    "int": frozenset({int}),
    "text": frozenset({str}),
    "bool": frozenset({bool}),
    "time": frozenset({int, float}),
    "interval": frozenset({int, float}),  # seconds
}
# What a caller that does not model them (a lesson, a hand-written script) binds: Policy's defaults.
QUERY_DEFAULTS: dict[str, float] = {"max_attempts": 25, "retry_backoff": 0, "stuck_after": 30.0}
# Parameters the model binds beyond those Lease Lab's own text uses: a queue's watcher that rescues
# by age instead of by lease_until (River's rescuer, pg-boss's expiry) compares its timestamps with
# %(now)s - %(stuck_after)s, the stuck age (policy.lease_ttl).
EXTRA_BINDS: dict[str, tuple[tuple[str, str], ...]] = {
    name: (("stuck_after", "interval"),)
    for name in ("requeue_expired", "select_stuck_jobs", "rescue_job")
}
PLACEHOLDER = re.compile(r"%\((\w+)\)s")  # a named parameter, %(name)s


@dataclass(frozen=True)
class Query:
    """One named statement: its SQL text, a one-line description and its typed parameters."""

    name: str
    description: str
    params: tuple[tuple[str, str], ...]  # (name, type) in declaration order
    sql: str

    @property
    def param_names(self) -> frozenset[str]:
        return frozenset(p for p, _ in self.params)

    def check(self, params: dict[str, Any]) -> None:
        """Raise ParameterError naming the query and the parameter if `params` does not fit."""
        if len(params) == len(self.params):
            for pname, allowed in self._allowed:
                if type(params.get(pname)) not in allowed:
                    break
            else:
                return
        self._explain(params)

    @cached_property
    def uses_clock(self) -> bool:
        """The statement reads the client's clock (`now`), bound at execution
        (sim.protocol.bind_clock)."""
        return "now" in self.param_names

    @cached_property
    def read_only(self) -> bool:
        """A plain SELECT (no FOR UPDATE): it never writes, locks or waits."""
        text = self.sql.lstrip().upper()
        return text.startswith("SELECT") and "FOR UPDATE" not in text

    @cached_property
    def _allowed(self) -> tuple[tuple[str, frozenset[type]], ...]:
        return tuple((p, PARAM_TYPES[t]) for p, t in self.params)

    def _explain(self, params: dict[str, Any]) -> None:
        for pname, ptype in self.params:
            if pname not in params:
                raise ParameterError(self.name, pname, f"missing (expects {ptype})")
            value = params[pname]
            if type(value) not in PARAM_TYPES[ptype]:
                raise ParameterError(
                    self.name, pname, f"expects {ptype}, got {type(value).__name__} {value!r}"
                )
        extra = sorted(set(params) - self.param_names)
        raise ParameterError(self.name, extra[0], "is not a parameter of this query")


def named_blocks(text: str) -> list[tuple[int, list[str]]]:
    """The `-- name:` blocks of a queries file (sql/queries.sql, or a user's queue's): for each,
    the index of its `-- name:` line and its lines up to the next block. Lines before the first
    block belong to none."""
    lines = text.splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith("-- name:")]
    ends = [*starts[1:], len(lines)]
    return [(start, lines[start:end]) for start, end in zip(starts, ends, strict=False)]


def parse_queries(text: str) -> dict[str, Query]:
    """Parse the `-- name:` / description / `-- params:` blocks of a queries file."""
    queries: dict[str, Query] = {}
    for _, lines in named_blocks(text):
        name = lines[0].removeprefix("-- name:").strip()
        description = lines[1].removeprefix("--").strip()
        if not lines[2].startswith("-- params:"):
            raise ValueError(f"query {name}: third line must be '-- params: ...'")
        declared = [p.split() for p in lines[2].removeprefix("-- params:").split(",") if p.strip()]
        params = tuple((p[0], p[1]) for p in declared)
        for pname, ptype in params:
            if ptype not in PARAM_TYPES:
                raise ValueError(f"query {name}: parameter {pname} has unknown type {ptype}")
        sql = "\n".join(line for line in lines[3:] if not line.startswith("--")).strip()
        sql = sql.rstrip(";").strip()
        used = set(PLACEHOLDER.findall(sql))
        if used != {p for p, _ in params}:
            raise ValueError(
                f"query {name}: declared {sorted(p for p, _ in params)}, uses {sorted(used)}"
            )
        if name in queries:
            raise ValueError(f"query {name} is defined twice")
        queries[name] = Query(name, description, params, sql)
    return queries


def _sql_text(filename: str) -> str:
    return (resources.files("sim") / "sql" / filename).read_text(encoding="utf-8")


@cache
def load_queries() -> dict[str, Query]:
    """All named queries, parsed once per process, each with every parameter the model binds to
    it (EXTRA_BINDS included: the wire sends only those the text uses)."""
    return {
        name: Query(name, q.description, q.params + EXTRA_BINDS.get(name, ()), q.sql)
        for name, q in parse_queries(_sql_text("queries.sql")).items()
    }


@cache
def job_schema_sql() -> str:
    """The DDL of the job table (payment_jobs): what a queue directory's schema.sql replaces."""
    return _sql_text("schema.sql")


@cache
def bookkeeping_sql() -> str:
    """The DDL of Lease Lab's own tables (dedup markers, ledger): never replaced."""
    return _sql_text("bookkeeping.sql")


def schema_sql() -> str:
    """The DDL that creates Lease Lab's tables in the current schema."""
    return bookkeeping_sql() + "\n" + job_schema_sql()


def get_query(name: str) -> Query:
    """The named query, or UnknownQueryError with a did-you-mean."""
    queries = load_queries()
    try:
        return queries[name]
    except KeyError:
        raise UnknownQueryError(name, difflib.get_close_matches(name, queries, n=1)) from None
