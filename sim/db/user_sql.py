"""A user's own SQL on the server, judged by what the server says it is: schema.sql run statement
by statement (each one's kind is the command tag PostgreSQL returns), and each named statement's
kind (a query, or a utility statement such as COMMIT, SET or COPY) from EXPLAIN of its prepared
form, which also checks its privileges without running it.

Refused, each as file:line: transaction control (Lease Lab owns the transactions), settings (SET,
RESET, DISCARD), anonymous code and procedures (DO, CALL), anything else that defines nothing;
a statement past the statement time limit; and, in queries.sql, anything but SELECT, INSERT,
UPDATE, DELETE or MERGE (with WITH).
"""

from __future__ import annotations

import functools
import json

from psycopg import pq

from sim.db.errors import QueueDefinitionError
from sim.db.sandbox import StatementLimitError, bounded, past_limit, timed_out
from sim.db.sql_split import split_statements

_OK = (pq.ExecStatus.COMMAND_OK, pq.ExecStatus.TUPLES_OK, pq.ExecStatus.EMPTY_QUERY)
_DEFINITIONS: tuple[str, ...] = ("CREATE", "ALTER", "DROP", "COMMENT", "INSERT", "UPDATE")
_DEFINITIONS += ("DELETE", "SELECT", "GRANT", "REVOKE", "TRUNCATE", "ANALYZE")
_NOT_DEFINITIONS: tuple[str, ...] = ("ALTER ROLE", "ALTER DATABASE", "ALTER SYSTEM")
_NOT_DEFINITIONS += ("ALTER TABLESPACE", "CREATE ROLE", "DROP ROLE", "CREATE DATABASE")
_NOT_DEFINITIONS += ("DROP DATABASE",)
_TRANSACTION: tuple[str, ...] = ("BEGIN", "START TRANSACTION", "COMMIT", "ROLLBACK", "SAVEPOINT")
_TRANSACTION += ("RELEASE", "PREPARE TRANSACTION", "COMMIT PREPARED", "ROLLBACK PREPARED")
_SESSION = ("SET", "RESET", "DISCARD", "SET CONSTRAINTS")
_CODE = ("DO", "CALL")
_TYPE_NAMES = {20: "int8", 25: "text", 16: "bool", 1184: "timestamptz"}
_REFUSED = "PostgreSQL refuses it to the run's role"
_OWN_SCHEMA = "a queue's SQL may touch only the run's own schema (keep names unqualified)"


def refusal(tag: str) -> str | None:
    """Why a statement the server tagged `tag` has no place in a schema.sql (None: it has)."""
    kind = _kind(tag)
    if kind in _TRANSACTION:
        return (
            f"{kind} is transaction control; Lease Lab runs schema.sql in one transaction of its "
            "own (and its statements in the model's): remove it"
        )
    if kind in _SESSION:
        return (
            f"{kind} changes the session's settings, which Lease Lab sets (search_path, time "
            "limits); remove it"
        )
    if kind in _CODE:
        return (
            f"{kind} runs code instead of defining the job table; write the definitions "
            "themselves (the run's schema starts empty)"
        )
    if kind in _NOT_DEFINITIONS or not kind.startswith(_DEFINITIONS):
        return f"{kind} is not part of a schema definition; remove it"
    return None


def _kind(tag: str) -> str:
    """'INSERT 0 1' -> 'INSERT'; 'CREATE TABLE' stays; 'SELECT 1' -> 'SELECT'."""
    words = tag.split()
    while words and words[-1].isdigit():
        words.pop()
    text = " ".join(words)
    for known in _NOT_DEFINITIONS + _TRANSACTION + _SESSION:
        if text == known or text.startswith(known + " "):
            return known
    return text


def run_schema(pg: pq.abc.PGconn, script: str, file: str, limit: float | None) -> None:
    """Run a schema.sql statement by statement, inside the caller's open transaction;
    ConfigError naming file:line for a refused kind, a failure or the time limit."""

    for statement in split_statements(script):
        where = f"{file}:{statement.line}"
        try:
            results = bounded(
                pg,
                functools.partial(pg.send_query, statement.text.encode()),
                limit if limit is not None else 3600.0,
                where,
            )
        except StatementLimitError as exc:
            raise QueueDefinitionError(str(exc)) from None
        for result in results:
            if result.status not in _OK:
                raise QueueDefinitionError(_failure(result, statement, file))
            problem = refusal((result.command_status or b"").decode())
            if problem:
                raise QueueDefinitionError(f"{where}: {problem}")
        if pg.transaction_status != pq.TransactionStatus.INTRANS:
            raise QueueDefinitionError(
                f"{where}: it ended Lease Lab's transaction (transaction control); remove it"
            )


def _failure(result: pq.abc.PGresult, statement, file: str) -> str:
    sqlstate = (result.error_field(pq.DiagnosticField.SQLSTATE) or b"").decode()
    raw = result.error_field(pq.DiagnosticField.STATEMENT_POSITION)
    line = statement.line_at(int(raw) - 1) if raw else statement.line
    if timed_out(sqlstate):
        return str(past_limit(f"{file}:{line}"))
    if sqlstate == "42501":
        return f"{file}:{line}: {_REFUSED}: {message(result)}; {_OWN_SCHEMA}"
    return f"{file}:{line}: PostgreSQL cannot run it: {message(result)}"


def message(result: pq.abc.PGresult) -> str:
    """The server's primary message, on one line."""
    primary = result.error_field(pq.DiagnosticField.MESSAGE_PRIMARY) or result.error_message or b""
    return " ".join(primary.decode(errors="replace").split())


def query_problem(
    pg: pq.abc.PGconn, prepared: bytes, oids: tuple[int, ...], limit: float | None, where: str
) -> str | None:
    """Why the prepared statement `prepared` cannot be one of a queue's named statements: a
    utility statement (COMMIT, SET, COPY, DO ...), or a query the run's role may not run
    (EXPLAIN checks the privileges of every table it touches, even in a WITH, without running
    it). None when it is fine. Runs inside the caller's transaction."""
    params = ", ".join(f"NULL::{_TYPE_NAMES.get(oid, 'text')}" for oid in oids)
    # `prepared` is Lease Lab's own name for the statement (letters and underscores)
    text = f"EXPLAIN (FORMAT JSON) EXECUTE {prepared.decode()}{f'({params})' if oids else ''}"
    query = text.encode()
    pg.exec_(b"SAVEPOINT leaselab_explain")
    try:
        results = bounded(pg, lambda: pg.send_query(query), limit or 3600.0, where)
    finally:
        pg.exec_(b"ROLLBACK TO SAVEPOINT leaselab_explain")
        pg.exec_(b"RELEASE SAVEPOINT leaselab_explain")
    result = results[-1] if results else None
    if result is None:
        return None
    if result.status != pq.ExecStatus.TUPLES_OK:
        sqlstate = (result.error_field(pq.DiagnosticField.SQLSTATE) or b"").decode()
        if sqlstate == "42501":
            return f"{_REFUSED}: {message(result)}; {_OWN_SCHEMA}"
        if timed_out(sqlstate):
            raise past_limit(where)
        return None  # a plan that NULL parameters upset says nothing about the statement
    value = result.get_value(0, 0)
    plan = json.loads(value.decode()) if value is not None else []
    if plan and not isinstance(plan[0], dict):
        return (
            "is not a query (SELECT, INSERT, UPDATE, DELETE or MERGE): transaction control, "
            "settings, COPY and other commands are not statements of a queue"
        )
    return None
