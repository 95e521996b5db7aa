"""A user's own queue: a directory whose queries.sql overrides Lease Lab's named statements and
whose optional schema.sql replaces the job table's schema. It runs on real PostgreSQL only.

    from sim.db.queue_dir import load_queue
    queue = load_queue("myqueue/")   # parse + check the text; QueueDefinitionError: one line, file:line
    queue.check_on(dsn)              # PREPARE every statement against the schema; check returned columns
    queue.require(scenario)          # refuse a scenario that calls a statement the queue lacks
    queue.queries                    # name -> Query: the project's statements, the user's in their place
    queue.schema_sql                 # the DDL of a run's schema: Lease Lab's bookkeeping + the job schema
    queue.where("heartbeat")         # 'myqueue/queries.sql:31', or "Lease Lab's sql/queries.sql"

queries.sql uses the block format of sql/queries.sql: `-- name: NAME`, a one-line description,
`-- params: NAME TYPE, ...`, then the statement. Each block replaces the project's statement of
that name (sim.db.contracts.CONTRACTS says what each must return); a block with no statement
leaves that statement out (a scenario that needs it is refused). Statements not overridden keep
the project's text; with a schema.sql, those that no longer PREPARE against it are left out too.
Lease Lab's bookkeeping tables (dedup markers, ledger) and their statements stay Lease Lab's.
"""

from __future__ import annotations

import difflib
import os
from dataclasses import dataclass, field
from pathlib import Path

from psycopg import pq

from sim.db.contracts import (
    BOOKKEEPING,
    COLUMN_OIDS,
    CONTRACTS,
    SQL_TYPE,
    STATUSES,
    bound_params,
    statements_called,
)
from sim.db.errors import QueueDefinitionError
from sim.db.queries import (
    PARAM_TYPES,
    PLACEHOLDER,
    Query,
    bookkeeping_sql,
    job_schema_sql,
    load_queries,
)
from sim.db.user_sql import query_problem, run_schema
from sim.errors import ConfigError

QUERIES_FILE = "queries.sql"
SCHEMA_FILE = "schema.sql"
_TYPE_NAMES = {
    16: "boolean",
    19: "name",
    20: "bigint",
    21: "smallint",
    23: "integer",
    25: "text",
    700: "real",
    701: "double precision",
    1042: "char",
    1043: "varchar",
    1082: "date",
    1114: "timestamp",
    1184: "timestamptz",
    1700: "numeric",
    2950: "uuid",
    3802: "jsonb",
    114: "json",
}


# Objects created by this transaction (pg_class rows it wrote) in another schema, or a moved search_path.
_ELSEWHERE = """
SELECT 'search_path' WHERE current_schema() IS DISTINCT FROM $1
UNION ALL
(SELECT n.nspname || '.' || c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
 WHERE c.xmin::text = (txid_current() % 4294967296)::text AND n.nspname <> $1
   AND n.nspname NOT LIKE 'pg_toast%' ORDER BY 1 LIMIT 1)
"""


@dataclass(frozen=True)
class Override:
    """One block of the user's queries.sql."""

    name: str
    line: int  # of `-- name:`
    sql_line: int  # of the statement's first line (0 when the block has no statement)
    description: str
    declared: tuple[tuple[str, str], ...]
    sql: str  # '' when the block leaves the statement out


@dataclass
class QueueDefinition:
    """A loaded queue directory; see the module docstring."""

    path: Path
    overrides: dict[str, Override]
    job_schema: str | None  # the text of schema.sql, None to keep the project's job table
    missing: dict[str, str] = field(default_factory=dict)  # statement -> why it is not available
    own_rights: bool = False  # run the SQL as the DSN user, not in a sandbox role (sim.db.sandbox)
    _checked: set = field(default_factory=set, repr=False)

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def queries(self) -> dict[str, Query]:
        """Every named query a backend may run: the project's, with the user's in their place.
        A user's statement keeps the project's parameter list: the model binds them all."""
        queries = dict(load_queries())
        for name, o in self.overrides.items():
            if o.sql:
                queries[name] = Query(name, o.description, bound_params(name), o.sql)
        return queries

    @property
    def schema_sql(self) -> str:
        return (
            bookkeeping_sql()
            + "\n"
            + (self.job_schema if self.job_schema is not None else job_schema_sql())
        )

    def file(self, name: str = QUERIES_FILE) -> str:
        """The path of one of the directory's files, as error messages name it."""
        return str(self.path / name)

    def where(self, name: str) -> str:
        """Where the text of statement `name` comes from."""
        o = self.overrides.get(name)
        if o is not None:
            return f"{self.file()}:{o.sql_line or o.line}"
        return "Lease Lab's sql/queries.sql"

    def sql_of(self, name: str) -> str | None:
        """The statement's text as it will run, None when the queue leaves it out."""
        if name in self.missing:
            return None
        o = self.overrides.get(name)
        return (o.sql or None) if o is not None else load_queries()[name].sql

    # ---- on a server ------------------------------------------------------------------------------

    def check_on(self, dsn: str) -> None:
        """PREPARE the schema and every statement on the server at `dsn`, in a transaction that is
        rolled back (nothing stays behind), and check the columns each returns. Raises
        QueueDefinitionError on the first problem; fills `missing` with the project's statements
        that do not fit a replaced schema. Done once per server."""
        if dsn in self._checked:
            return
        from sim.db.sandbox import sandbox

        with sandbox(dsn, own_rights=self.own_rights) as box:
            conn = box.connect(application_name="leaselab:check")
            try:
                self.missing = {
                    n: "left out by an empty block" for n, o in self.overrides.items() if not o.sql
                }
                _Checker(self, conn.pgconn, box.schema, box.limit).run()
            finally:
                conn.close()
        self._checked.add(dsn)

    def check_jobs_table(self, rows: list[tuple]) -> None:
        """dump_jobs must speak Lease Lab's words: a status it does not know is the queue's mistake."""
        found = sorted({row[3] for row in rows} - set(STATUSES), key=str)
        if found:
            raise QueueDefinitionError(
                f"{self.where('dump_jobs')}: dump_jobs: returned status {found[0]!r}; Lease Lab reads "
                f"{', '.join(STATUSES)} (map your states with CASE ... END)"
            )

    def absent(self, name: str) -> QueueDefinitionError:
        """The error for running statement `name`, which this queue leaves out."""
        return QueueDefinitionError(
            f"{self.file()}: {name}: this queue has none ({self.missing[name]})"
        )

    def require(self, scenario) -> None:
        """QueueDefinitionError if a run of `scenario` would call a statement this queue lacks."""
        for name, why in statements_called(scenario).items():
            if name in self.missing:
                raise QueueDefinitionError(
                    f"{self.file()}: {name}: {why} calls it, but this queue has none ({self.missing[name]}); "
                    f"define {name} in {QUERIES_FILE} or change {why.split(' = ')[0]}"
                )


def load_queue(path: str | Path, *, own_rights: bool = False) -> QueueDefinition:
    """Read and check a queue directory's text (no server needed); QueueDefinitionError if bad.
    `own_rights`: run its SQL with the DSN user's own rights instead of in a sandbox role
    (for a server where that user cannot create roles; see sim.db.sandbox)."""
    root = Path(path)
    if not root.is_dir():
        raise QueueDefinitionError(
            f"--sql {path}: not a directory (expected one holding {QUERIES_FILE} "
            f"and optionally {SCHEMA_FILE})"
        )
    queries = root / QUERIES_FILE
    if not queries.exists():
        raise QueueDefinitionError(
            f"--sql {path}: no {QUERIES_FILE} in it (the statements that override "
            "Lease Lab's, in the block format of sql/queries.sql)"
        )
    schema = root / SCHEMA_FILE
    job_schema = _read(schema) if schema.exists() else None
    if job_schema is not None and not job_schema.strip():
        raise QueueDefinitionError(
            f"{schema}:1: empty; remove it to keep Lease Lab's job table, or create yours"
        )
    overrides = parse_overrides(_read(queries), str(queries))
    return QueueDefinition(root, overrides, job_schema, own_rights=own_rights)


def _read(path: Path) -> str:
    """A queue file's text: UTF-8 (a byte-order mark is dropped), capped, and without NUL bytes
    (libpq would cut the statement there, while Lease Lab read all of it)."""
    from sim.input_files import read_capped
    from sim.limits import MAX_SQL_BYTES

    try:
        raw = read_capped(path, "queue SQL", MAX_SQL_BYTES)
    except ConfigError as exc:
        raise QueueDefinitionError(str(exc)) from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise QueueDefinitionError(
            f"{path}:{line}: not UTF-8 text ({exc.reason} at byte {exc.start})"
        ) from None
    if "\0" in text:
        line = text.count("\n", 0, text.index("\0")) + 1
        raise QueueDefinitionError(
            f"{path}:{line}: contains a NUL byte, which PostgreSQL cannot take in a statement; "
            "remove it"
        )
    return text


def parse_overrides(text: str, file: str = QUERIES_FILE) -> dict[str, Override]:
    """The blocks of a user's queries.sql, each checked against its statement's contract."""
    lines = text.splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith("-- name:")]
    if not starts:
        raise QueueDefinitionError(
            f"{file}:1: no '-- name: NAME' block; each statement starts with "
            "-- name:, a description line and -- params:"
        )
    out: dict[str, Override] = {}
    for k, i in enumerate(starts):
        end = starts[k + 1] if k + 1 < len(starts) else len(lines)
        block = _block(lines, i, end, file)
        if block.name in out:
            _fail(file, i + 1, block.name, f"defined twice (first at line {out[block.name].line})")
        out[block.name] = block
    return out


def _fail(file: str, line: int, name: str, problem: str):
    raise QueueDefinitionError(f"{file}:{line}: {name}: {problem}")


def _block(lines: list[str], i: int, end: int, file: str) -> Override:
    name = lines[i].removeprefix("-- name:").strip()
    line = i + 1
    if not name:
        raise QueueDefinitionError(f"{file}:{line}: '-- name:' without a statement name")
    if name in BOOKKEEPING:
        _fail(
            file,
            line,
            name,
            "is Lease Lab's bookkeeping (dedup markers and ledger stay Lease Lab's); remove it",
        )
    if name not in CONTRACTS:
        close = difflib.get_close_matches(name, CONTRACTS, n=1)
        hint = f" (did you mean {close[0]}?)" if close else ""
        _fail(
            file,
            line,
            name,
            f"unknown statement name{hint}; a queue can define {', '.join(CONTRACTS)}",
        )
    j = i + 1
    header: list[tuple[int, str]] = []
    while j < end and lines[j].startswith("--"):
        header.append((j + 1, lines[j]))
        j += 1
    params = [(n, text) for n, text in header if text.startswith("-- params:")]
    if not params:
        _fail(
            file,
            line,
            name,
            "no '-- params:' line after the description (declare the parameters it uses, "
            f"e.g. -- params: {_binds(name)})",
        )
    params_line, params_text = params[0]
    description = next((t.removeprefix("--").strip() for n, t in header if n < params_line), "")
    declared = _declared(params_text, file, params_line, name)
    body = [("" if text.lstrip().startswith("--") else text) for text in lines[j:end]]
    first = next((n for n, text in enumerate(body) if text.strip()), None)
    if first is None:
        if not CONTRACTS[name].optional:
            _fail(file, line, name, "has no statement, and every run needs one")
        if declared:
            _fail(
                file,
                params_line,
                name,
                "has no statement but declares parameters; an empty block leaves "
                "the statement out and declares none",
            )
        return Override(name, line, 0, description, (), "")
    sql = "\n".join(body[first:]).rstrip().rstrip(";").rstrip()
    sql_line = j + first + 1
    _check_params(name, declared, sql, file, params_line, sql_line)
    return Override(name, line, sql_line, description, declared, sql)


def _binds(name: str) -> str:
    return ", ".join(f"{p} {t}" for p, t in bound_params(name)) or "(none)"


def _declared(text: str, file: str, line: int, name: str) -> tuple[tuple[str, str], ...]:
    out = []
    for item in text.removeprefix("-- params:").split(","):
        if not item.strip():
            continue
        parts = item.split()
        if len(parts) != 2:
            _fail(
                file,
                line,
                name,
                f"parameter declaration {item.strip()!r} must be NAME TYPE, e.g. 'id int'",
            )
        pname, ptype = parts
        if ptype not in PARAM_TYPES:
            _fail(
                file,
                line,
                name,
                f"parameter {pname} has unknown type {ptype} (int, text, bool or time)",
            )
        out.append((pname, ptype))
    names = [p for p, _ in out]
    for p in names:
        if names.count(p) > 1:
            _fail(file, line, name, f"parameter {p} is declared twice")
    return tuple(out)


def _check_params(
    name: str, declared, sql: str, file: str, params_line: int, sql_line: int
) -> None:
    bound = dict(bound_params(name))
    for pname, ptype in declared:
        if pname not in bound:
            _fail(
                file,
                params_line,
                name,
                f"declares {pname}, which Lease Lab does not bind to {name}; "
                f"it binds {_binds(name)}",
            )
        if bound[pname] != ptype:
            _fail(
                file,
                params_line,
                name,
                f"declares {pname} {ptype}, but Lease Lab binds {pname} as {bound[pname]}",
            )
    used = {}
    for n, text in enumerate(sql.splitlines()):
        for p in PLACEHOLDER.findall(text):
            used.setdefault(p, sql_line + n)
    names = {p for p, _ in declared}
    for pname, at in used.items():
        if pname not in names:
            known = (
                f" (Lease Lab binds it as {bound[pname]}: add '{pname} {bound[pname]}')"
                if pname in bound
                else f"; Lease Lab binds {_binds(name)}"
            )
            _fail(
                file,
                at,
                name,
                f"uses %({pname})s, which its -- params: line does not declare{known}",
            )
    for pname, _ in declared:
        if pname not in used:
            _fail(file, params_line, name, f"declares {pname} but never uses %({pname})s")
    for pname in CONTRACTS[name].required:
        if pname not in used:
            _fail(
                file,
                sql_line,
                name,
                f"must use %({pname})s (the job Lease Lab means); it uses "
                f"{', '.join(sorted(used)) or 'no parameter'}",
            )


class _Checker:
    """PREPARE on a server, inside one rolled-back transaction in a throwaway schema."""

    def __init__(self, queue: QueueDefinition, pg, schema: str, limit: float | None):
        self.queue, self.pg, self.schema, self.limit = queue, pg, schema, limit

    def _exec(self, text: str):
        return self.pg.exec_(text.encode())

    def run(self) -> None:

        q, schema = self.queue, self.schema
        self._ok(self._exec("BEGIN"))
        try:
            self._ok(self._exec(f'SET LOCAL search_path TO "{schema}"'))
            self._ok(self._exec(bookkeeping_sql()))
            if q.job_schema is None:
                self._ok(self._exec(job_schema_sql()))
            else:
                run_schema(self.pg, q.job_schema, q.file(SCHEMA_FILE), self.limit)
                self._own_schema_only(schema)
            for name in [
                *q.overrides,
                *(n for n in CONTRACTS if n not in q.overrides),
            ]:  # the user's first
                self._statement(name)
        finally:
            self._exec("ROLLBACK")

    def _own_schema_only(self, schema: str) -> None:
        """schema.sql must create its objects in the run's own schema, and leave search_path there."""
        result = self.pg.exec_params(_ELSEWHERE.encode(), [schema.encode()])
        self._ok(result)
        if result.ntuples:
            where = result.get_value(0, 0).decode()
            what = "moves search_path" if where == "search_path" else f"creates {where}"
            word = where.rpartition(".")[2].lower()
            lines = self.queue.job_schema.lower().splitlines()
            line = next((i + 1 for i, text in enumerate(lines) if word in text), 1)
            raise QueueDefinitionError(
                f"{self.queue.file(SCHEMA_FILE)}:{line}: {what} outside the run's own schema; "
                "keep names unqualified (Lease Lab creates everything in a schema of its own "
                "and drops it afterwards)"
            )

    @staticmethod
    def _ok(result) -> None:
        if result.status not in (pq.ExecStatus.COMMAND_OK, pq.ExecStatus.TUPLES_OK):
            raise QueueDefinitionError(
                f"PostgreSQL refused to set up the check: {_message(result)}"
            )

    def _statement(self, name: str) -> None:
        q = self.queue
        o = q.overrides.get(name)
        if o is not None and not o.sql:
            return
        from sim.db.wire import statement  # the wire form a run sends: $n placeholders, typed

        sql = o.sql if o is not None else load_queries()[name].sql
        wire = statement(Query(name, "", bound_params(name), sql))
        text = wire.text.decode()
        self._ok(self._exec("SAVEPOINT leaselab_check"))
        stmt = f"leaselab_check_{name}".encode()
        result = self.pg.prepare(stmt, wire.text, list(wire.oids))
        if result.status != pq.ExecStatus.COMMAND_OK:
            self._ok(self._exec("ROLLBACK TO SAVEPOINT leaselab_check"))
            if o is None:  # the project's text under the user's schema: not available, not an error
                why = f"not in {QUERIES_FILE}, and Lease Lab's text does not fit {SCHEMA_FILE}: {_message(result)}"
                if not CONTRACTS[name].optional:
                    raise QueueDefinitionError(
                        f"{q.file()}: {name}: {why}; every run needs it: define it in "
                        f"{QUERIES_FILE}"
                    )
                q.missing[name] = why
                return
            line = o.sql_line + text[: _position(result)].count("\n")
            against = (
                q.file(SCHEMA_FILE)
                if q.job_schema is not None
                else "Lease Lab's job table (sql/schema.sql)"
            )
            _fail(
                q.file(),
                line,
                name,
                f"PostgreSQL cannot PREPARE it against {against}: {_message(result)}",
            )
        if o is not None:
            problem = query_problem(self.pg, stmt, wire.oids, self.limit, q.where(name))
            if problem:
                _fail(q.file(), o.sql_line, name, problem)
        described = self.pg.describe_prepared(stmt)
        columns = [
            (described.fname(i).decode(), described.ftype(i)) for i in range(described.nfields)
        ]
        self._exec(f"DEALLOCATE leaselab_check_{name}")
        self._ok(self._exec("RELEASE SAVEPOINT leaselab_check"))
        if o is not None:
            problem = _columns_problem(name, columns)
            if problem:
                _fail(q.file(), o.sql_line, name, problem)


def _columns_problem(name: str, columns: list[tuple[str, int]]) -> str | None:
    """Why the returned columns do not fit the contract, or None."""
    c = CONTRACTS[name]
    wanted = ", ".join(f"{col} {SQL_TYPE[kind]}" for col, kind in c.returns)
    got = ", ".join(col for col, _ in columns) or "no columns"
    if c.exact and len(columns) != len(c.returns) or len(columns) < len(c.returns):
        how = "exactly" if c.exact else "at least"
        extra = " (add RETURNING ...)" if not columns else ""
        return f"returns {len(columns)} column(s) ({got}); Lease Lab reads {how} {len(c.returns)}: {wanted}{extra}"
    for i, ((col, kind), (got_name, oid)) in enumerate(zip(c.returns, columns, strict=False)):
        if oid not in COLUMN_OIDS[kind]:
            return (
                f"column {i + 1} ({got_name}) is {_TYPE_NAMES.get(oid, f'type OID {oid}')}; Lease Lab reads it as {col} {SQL_TYPE[kind]} "
                f"(cast it: ...::{SQL_TYPE[kind]})"
            )
    return None


def _position(result) -> int:
    raw = result.error_field(pq.DiagnosticField.STATEMENT_POSITION)
    return max(0, int(raw) - 1) if raw else 0


def _message(result) -> str:
    primary = result.error_field(pq.DiagnosticField.MESSAGE_PRIMARY) or result.error_message or b""
    return " ".join(primary.decode(errors="replace").split())


def loaded(sql: str | Path | QueueDefinition) -> QueueDefinition:
    """A QueueDefinition from a directory path, or the one given."""
    if isinstance(sql, QueueDefinition):
        return sql
    if not isinstance(sql, str | os.PathLike):
        raise QueueDefinitionError(
            f"sql: expected a queue directory (a path), got {type(sql).__name__} {sql!r:.60}"
        )
    return load_queue(sql)


__all__ = [
    "QueueDefinition",
    "QueueDefinitionError",
    "Override",
    "load_queue",
    "loaded",
    "parse_overrides",
    "QUERIES_FILE",
    "SCHEMA_FILE",
]
