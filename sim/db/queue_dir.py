"""A user's own queue: a directory whose queries.sql overrides Lease Lab's named statements,
whose optional schema.sql replaces the job table's schema and whose optional queue.toml holds the
queue's own policy settings (sim.db.queue_settings). It runs on real PostgreSQL only.

    from sim.db.queue_dir import load_queue
    queue = load_queue("myqueue/")   # parse + check the text; QueueDefinitionError: one line, file:line
    queue.check_on(dsn)              # PREPARE every statement against the schema; check returned columns
    scenario, queue = queue.settle(scenario)  # queue.toml's settings over the scenario's
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

import dataclasses
import difflib
import re
import secrets
from dataclasses import dataclass, field
from pathlib import Path

from psycopg import pq

from sim.db import queue_settings
from sim.db.contracts import (
    BOOKKEEPING,
    COLUMN_OIDS,
    CONTRACTS,
    SQL_TYPE,
    STATUSES,
    bound_params,
    statements_called,
)
from sim.db.queries import (
    PARAM_TYPES,
    PLACEHOLDER,
    Query,
    bookkeeping_sql,
    job_schema_sql,
    load_queries,
)
from sim.errors import ConfigError
from sim.wording import count

QUERIES_FILE = "queries.sql"
SCHEMA_FILE = "schema.sql"
SETTINGS_FILE = queue_settings.SETTINGS_FILE
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


class QueueDefinitionError(ConfigError):
    """A queue directory that cannot be used: one line naming file:line, the statement and the problem."""


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
    _checked: set = field(default_factory=set, repr=False)
    settings: dict = field(default_factory=dict)  # queue.toml: {"policy.NAME": value}
    settled: bool = False  # its settings are already in the scenario given with it

    def apply(self, scenario):
        """`scenario` with the queue's own settings (queue.toml) in place of its own; unchanged
        once settled (a caller applied them, and perhaps overrides after them)."""
        if self.settled:
            return scenario
        return queue_settings.apply(
            scenario, self.settings, self.path / SETTINGS_FILE, QueueDefinitionError
        )

    def settle(self, scenario):
        """(the scenario with the queue's settings, this queue marked settled): what a caller
        passes down, so that nothing below applies the settings again over its overrides."""
        return self.apply(scenario), dataclasses.replace(self, settled=True)

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
        from sim.db.server import open_connection

        conn = open_connection(dsn, autocommit=True, application_name="leaselab:check")
        try:
            self.missing = {
                n: "left out by an empty block" for n, o in self.overrides.items() if not o.sql
            }
            _Checker(self, conn.pgconn).run()
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

    def require(self, *scenarios) -> None:
        """QueueDefinitionError if a run of any of `scenarios` would call a statement this queue
        lacks: every such statement in one line, with the settings that call it and why it is
        missing."""
        lacking: dict[str, list[str]] = {}  # statement -> the settings that call it
        for scenario in scenarios:
            for name, why in statements_called(scenario).items():
                if name in self.missing and why not in lacking.setdefault(name, [why]):
                    lacking[name].append(why)
        lacking = {name: whys for name, whys in lacking.items() if name in self.missing}
        if not lacking:
            return
        reasons: dict[str, list[str]] = {}
        for name, whys in lacking.items():
            reasons.setdefault(self.missing[name], []).append(f"{name} ({', '.join(whys)})")
        parts = "; ".join(f"{', '.join(names)}: {why}" for why, names in reasons.items())
        settings = sorted(
            {why.split(" = ")[0].split(" > ")[0] for w in lacking.values() for why in w}
        )
        hint = ""
        if (
            "requeue_expired" in lacking
            and "rescue_job" in self.overrides
            and self.sql_of("rescue_job")
        ):
            hint = (
                " (this queue rescues by read-then-write, select_stuck_jobs then rescue_job: "
                "set policy.watcher_gap > 0, e.g. in queue.toml)"
            )
        raise QueueDefinitionError(
            f"{self.file()}: the runs call {count(len(lacking), 'statement')} this queue lacks: "
            f"{parts}; define {'it' if len(lacking) == 1 else 'them'} in {QUERIES_FILE} or change "
            f"{', '.join(settings)}{hint}"
        )


def load_queue(path: str | Path) -> QueueDefinition:
    """Read and check a queue directory's text (no server needed); QueueDefinitionError if bad."""
    root = Path(path)
    if not root.is_dir():
        raise QueueDefinitionError(
            f"--sql {path}: not a directory (expected one holding {QUERIES_FILE} "
            f"and optionally {SCHEMA_FILE})"
        )
    queries = root / QUERIES_FILE
    if not queries.is_file():
        raise QueueDefinitionError(
            f"--sql {path}: no {QUERIES_FILE} in it (the statements that override "
            "Lease Lab's, in the block format of sql/queries.sql)"
        )
    schema = root / SCHEMA_FILE
    job_schema = _read(schema) if schema.is_file() else None
    if job_schema is not None and not job_schema.strip():
        raise QueueDefinitionError(
            f"{schema}:1: empty; remove it to keep Lease Lab's job table, or create yours"
        )
    overrides = parse_overrides(_read(queries), str(queries))
    settings_file = root / SETTINGS_FILE
    settings = (
        queue_settings.read_settings(settings_file, QueueDefinitionError)
        if settings_file.is_file()
        else {}
    )
    return QueueDefinition(root, overrides, job_schema, settings=settings)


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise QueueDefinitionError(
            f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})"
        ) from None


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
    _foreign_placeholders(name, sql, file, sql_line)
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
                f"parameter {pname} has unknown type {ptype} (int, text, bool, time or interval)",
            )
        out.append((pname, ptype))
    names = [p for p, _ in out]
    for p in names:
        if names.count(p) > 1:
            _fail(file, line, name, f"parameter {p} is declared twice")
    return tuple(out)


# Text no placeholder can hide in: literals, quoted identifiers, dollar quotes, comments.
_QUOTED = re.compile(
    r"'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|\$((?:[A-Za-z_]\w*)?)\$.*?\$\1\$|--[^\n]*|/\*.*?\*/", re.S
)
# Placeholders of other drivers pasted with a statement: libpq/pgx $1, sqlc's @name and
# sqlc.arg(name), JDBC/SQLAlchemy/Ecto's :name, psycopg's positional %s.
_FOREIGN = re.compile(
    r"(?P<positional>(?<![\w$])\$\d+\b)"
    r"|(?P<sqlc>\bsqlc\.n?arg\(\s*'?(?P<sqlc_name>\w+)'?\s*\))"
    r"|(?P<at>(?<![\w@<])@(?P<at_name>[A-Za-z_]\w*))"
    r"|(?P<colon>(?<![\w:]):(?P<colon_name>[A-Za-z_]\w*))"
    r"|(?P<pyformat>%s\b)"
)


def _foreign_placeholders(name: str, sql: str, file: str, sql_line: int) -> None:
    """A placeholder of another driver gets named as such, with the %(name)s form to use."""
    text = _QUOTED.sub(lambda m: re.sub(r"[^\n]", " ", m.group()), sql)
    found = _FOREIGN.search(text)
    if found is None:
        return
    line = sql_line + text[: found.start()].count("\n")
    token = found.group()
    bound = dict(bound_params(name))
    named = found.group("sqlc_name") or found.group("at_name") or found.group("colon_name")
    first = bound_params(name)[0][0] if bound_params(name) else "name"
    if found.group("positional") or found.group("pyformat"):
        head = f"uses {token}, a positional placeholder; Lease Lab binds by name, as %(name)s"
        use = f"{name} binds {_binds(name)}: write %({first})s and the like"
    elif named in bound:
        head = f"uses {token}, another driver's named placeholder; Lease Lab binds as %(name)s"
        use = f"write %({named})s"
    else:
        head = f"uses {token}, another driver's named placeholder; Lease Lab binds as %(name)s"
        use = f"{name} binds {_binds(name)}: write one of those, e.g. %({first})s"
    _fail(file, line, name, f"{head}: {use}")


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

    def __init__(self, queue: QueueDefinition, pg):
        self.queue, self.pg = queue, pg

    def _exec(self, text: str):
        return self.pg.exec_(text.encode())

    def run(self) -> None:
        q = self.queue
        schema = f"leaselab_check_{secrets.token_hex(6)}"
        self._ok(self._exec("BEGIN"))
        try:
            self._ok(self._exec(f'CREATE SCHEMA "{schema}"'))
            self._ok(self._exec(f'SET LOCAL search_path TO "{schema}"'))
            self._ok(self._exec(bookkeeping_sql()))
            if q.job_schema is None:
                self._ok(self._exec(job_schema_sql()))
            else:
                result = self._exec(q.job_schema)
                if (
                    result.status != pq.ExecStatus.COMMAND_OK
                    and result.status != pq.ExecStatus.TUPLES_OK
                ):
                    line = 1 + q.job_schema[: _position(result)].count("\n")
                    raise QueueDefinitionError(
                        f"{q.file('schema.sql')}:{line}: PostgreSQL cannot run it: "
                        f"{_message(result)}"
                    )
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
    return sql if isinstance(sql, QueueDefinition) else load_queue(sql)


__all__ = [
    "QueueDefinition",
    "QueueDefinitionError",
    "Override",
    "load_queue",
    "loaded",
    "parse_overrides",
    "QUERIES_FILE",
    "SCHEMA_FILE",
    "SETTINGS_FILE",
]
