"""A user's own SQL, judged by PostgreSQL's own parser before anything runs, then by the server:
each statement of schema.sql is classified with pglast (the server's parser, as a library) and
refused, as file:line, unless it defines something (tables, indexes, types, functions, triggers,
comments, grants) or writes rows into the run's own tables; then it runs statement by statement
under the sandbox's time limit. A named statement of queries.sql must be one SELECT, INSERT,
UPDATE, DELETE or MERGE (with WITH); EXPLAIN of its prepared form then checks its privileges
without running it.

Refused before anything runs: transaction control (Lease Lab owns the transactions: BEGIN,
COMMIT, SAVEPOINT, PREPARE TRANSACTION ...), settings (SET, RESET, DISCARD), anonymous code and
procedures (DO, CALL), COPY (it streams to or from the client or the server's files), and anything
else that defines nothing (roles, databases, LISTEN, LOCK, EXPLAIN ANALYZE ...). Results are read
bounded: rows of schema.sql are streamed and dropped, a COPY that reached the wire anyway is
ended, and every statement has the time limit; the settings of the run's role must stay as Lease
Lab set them.
"""

from __future__ import annotations

import functools
import json

import pglast
from psycopg import pq

from sim.db.errors import QueueDefinitionError
from sim.db.queue.sandbox import (
    StatementLimitError,
    TimeBudget,
    bounded,
    past_limit,
    timed_out,
)
from sim.db.sql_split import Statement, split_statements

_OK = (pq.ExecStatus.COMMAND_OK, pq.ExecStatus.TUPLES_OK, pq.ExecStatus.EMPTY_QUERY)
# What a schema.sql may hold: definitions in the run's own schema, and rows for its tables.
SCHEMA_STATEMENTS = frozenset(
    """CreateStmt CreateSeqStmt AlterSeqStmt IndexStmt AlterTableStmt ViewStmt CreateTableAsStmt
    CreateFunctionStmt AlterFunctionStmt CreateTrigStmt RuleStmt CreatePolicyStmt AlterPolicyStmt
    CommentStmt CompositeTypeStmt CreateEnumStmt AlterEnumStmt CreateRangeStmt CreateDomainStmt
    AlterDomainStmt DefineStmt AlterTypeStmt CreateStatsStmt AlterStatsStmt DropStmt RenameStmt
    TruncateStmt GrantStmt InsertStmt UpdateStmt DeleteStmt MergeStmt SelectStmt VacuumStmt
    RefreshMatViewStmt""".split()
    + ["SelectStmt INTO"]
)
QUERY_STATEMENTS = frozenset({"SelectStmt", "InsertStmt", "UpdateStmt", "DeleteStmt", "MergeStmt"})
_TRANSACTION = frozenset({"TransactionStmt"})
_SESSION = frozenset({"VariableSetStmt", "VariableShowStmt", "DiscardStmt", "ConstraintsSetStmt"})
_CODE = frozenset({"DoStmt", "CallStmt"})
_TWO_WORDS = ("ALTER", "CREATE", "DROP", "PREPARE", "GRANT", "REASSIGN", "IMPORT", "SECURITY")
_TYPE_NAMES = {
    20: "int8",
    25: "text",
    16: "bool",
    1184: "timestamptz",
    1186: "interval",
    2950: "uuid",
}
_REFUSED = "PostgreSQL refuses it to the run's role"
_OWN_SCHEMA = "a queue's SQL may touch only the run's own schema (keep names unqualified)"
# The run role's own settings and its database's: a statement that changes them (ALTER ROLE ...
# SET, through a function too) would change every later connection of the run.
_SETTINGS = """
SELECT coalesce(string_agg(setdatabase || ':' || setrole || ':' || array_to_string(setconfig, ','),
                           ';' ORDER BY setdatabase, setrole), '')
  FROM pg_db_role_setting
 WHERE setrole = (SELECT oid FROM pg_roles WHERE rolname = current_user)
    OR (setrole = 0 AND setdatabase = (SELECT oid FROM pg_database
                                        WHERE datname = current_database()))
"""


def kinds(text: str) -> list[tuple[str, str]]:
    """(parse node, leading words) of each statement in `text`, as PostgreSQL's parser reads it;
    ValueError with the parser's message if it cannot."""
    try:
        parsed = pglast.parse_sql(text)
    except pglast.parser.ParseError as exc:
        raise ValueError(str(exc)) from None
    encoded = text.encode()
    out = []
    for raw in parsed:
        start = raw.stmt_location or 0
        end = start + raw.stmt_len if raw.stmt_len else len(encoded)
        node = type(raw.stmt).__name__
        if node == "SelectStmt" and getattr(raw.stmt, "intoClause", None) is not None:
            node = "SelectStmt INTO"  # SELECT ... INTO creates a table
        out.append((node, _label(encoded[start:end].decode(errors="replace"))))
    return out


def _label(text: str) -> str:
    """'PREPARE TRANSACTION', 'COPY', 'ALTER ROLE': the statement's leading words, as its kind."""
    words = [w.strip("(;").upper() for w in text.split()[:3]]
    if not words:
        return "an empty statement"
    if words[0] in _TWO_WORDS and len(words) > 1:
        if words[1] in ("OR", "UNIQUE", "TEMP", "TEMPORARY", "UNLOGGED") and len(words) > 2:
            return f"{words[0]} {words[2]}"
        return f"{words[0]} {words[1]}"
    if words[0] in ("COMMIT", "ROLLBACK") and len(words) > 1 and words[1] == "PREPARED":
        return f"{words[0]} PREPARED"
    return words[0]


def refusal(node: str, kind: str) -> str | None:
    """Why a statement (its parse node and leading words) has no place in a schema.sql (None:
    it has)."""
    if node in _TRANSACTION:
        return (
            f"{kind} is transaction control; Lease Lab runs schema.sql in one transaction of its "
            "own (and its statements in the model's): remove it"
        )
    if node in _SESSION:
        return (
            f"{kind} changes the session's settings, which Lease Lab sets (search_path, time "
            "limits); remove it"
        )
    if node in _CODE:
        return (
            f"{kind} runs code instead of defining the job table; write the definitions "
            "themselves (the run's schema starts empty)"
        )
    if node == "CopyStmt":
        return (
            "COPY moves data to or from the client or the server's files, which a queue's SQL "
            "may not; load rows with INSERT"
        )
    if node not in SCHEMA_STATEMENTS:
        return f"{kind} is not part of a schema definition; remove it"
    return None


def check_schema(script: str, file: str) -> list[Statement]:
    """The statements of a schema.sql, each classified by PostgreSQL's parser before any runs;
    QueueDefinitionError naming file:line for the first one refused."""
    statements = split_statements(script)
    for statement in statements:
        try:
            found = kinds(statement.text)
        except ValueError as exc:
            raise QueueDefinitionError(
                f"{file}:{statement.line}: PostgreSQL's parser cannot read it: {exc}"
            ) from None
        for node, kind in found:
            problem = refusal(node, kind)
            if problem:
                raise QueueDefinitionError(f"{file}:{statement.line}: {problem}")
    return statements


def query_kind_problem(text: str) -> str | None:
    """Why the text of a named statement (in its wire form, $n placeholders) is not one query
    (None: it is), as PostgreSQL's parser reads it; a text the parser cannot read is left to the
    server's PREPARE, which names the error's position."""
    try:
        found = kinds(text)
    except ValueError:
        return None
    if len(found) != 1:
        return (
            f"holds {len(found)} statements; each named statement is exactly one query "
            "(SELECT, INSERT, UPDATE, DELETE or MERGE)"
        )
    node, kind = found[0]
    if node not in QUERY_STATEMENTS:
        return (
            f"is not a query ({kind}; a queue's statement is a SELECT, INSERT, UPDATE, DELETE or "
            "MERGE): transaction control, settings, COPY and other commands are not statements "
            "of a queue"
        )
    return None


def run_schema(
    pg: pq.abc.PGconn,
    script: str,
    file: str,
    limit: float | None,
    budget: TimeBudget | None = None,
) -> None:
    """Run a schema.sql statement by statement, inside the caller's open transaction, once every
    statement was classified (check_schema); ConfigError naming file:line for a refused kind, a
    failure, a changed setting of the run's role, the statement or the total time limit."""
    statements = check_schema(script, file)
    settings = settings_of(pg)
    for statement in statements:
        where = f"{file}:{statement.line}"
        try:
            results = bounded(
                pg,
                functools.partial(pg.send_query, statement.text.encode()),
                limit if limit is not None else 3600.0,
                where,
                budget=budget,
                stream=True,
            )
        except StatementLimitError as exc:
            raise QueueDefinitionError(str(exc)) from None
        for result in results:
            if result.status not in _OK:
                raise QueueDefinitionError(_failure(result, statement, file))
        if pg.transaction_status != pq.TransactionStatus.INTRANS:
            raise QueueDefinitionError(
                f"{where}: it ended Lease Lab's transaction (transaction control); remove it"
            )
        if settings_of(pg) != settings:
            raise QueueDefinitionError(
                f"{where}: it changed the settings of the run's role or database (ALTER ROLE "
                "... SET, directly or in a function), which every later connection of the run "
                "would take; a queue's SQL may not: remove it"
            )


def settings_of(pg: pq.abc.PGconn) -> bytes | None:
    """The settings of the connection's role and of its database (pg_db_role_setting), as one
    value: what Lease Lab set, which the queue's SQL must leave alone."""
    result = pg.exec_(_SETTINGS.encode())
    if result.status != pq.ExecStatus.TUPLES_OK or not result.ntuples:
        return None
    return result.get_value(0, 0)


def _failure(result: pq.abc.PGresult, statement: Statement, file: str) -> str:
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
    pg: pq.abc.PGconn,
    prepared: bytes,
    oids: tuple[int, ...],
    limit: float | None,
    where: str,
    budget: TimeBudget | None = None,
) -> str | None:
    """Why the prepared statement `prepared` cannot be one of a queue's named statements: a
    query the run's role may not run (EXPLAIN checks the privileges of every table it touches,
    even in a WITH, without running it), or, should the parser have missed it, not a query at
    all. None when it is fine. Runs inside the caller's transaction."""
    params = ", ".join(f"NULL::{_TYPE_NAMES.get(oid, 'text')}" for oid in oids)
    # `prepared` is Lease Lab's own name for the statement (letters and underscores)
    text = f"EXPLAIN (FORMAT JSON) EXECUTE {prepared.decode()}{f'({params})' if oids else ''}"
    query = text.encode()
    pg.exec_(b"SAVEPOINT leaselab_explain")
    try:
        results = bounded(pg, lambda: pg.send_query(query), limit or 3600.0, where, budget=budget)
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
