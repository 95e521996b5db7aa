"""A user's own queue: a directory whose queries.sql overrides Lease Lab's named statements,
whose optional schema.sql replaces the job table's schema and whose optional queue.toml holds the
queue's own policy settings (sim.db.queue.settings). It runs on real PostgreSQL only.

    from sim.db.queue.directory import load_queue
    queue = load_queue("myqueue/")   # parse + check the text; QueueDefinitionError: one line,
                                     # file:line
    queue.check_on(dsn)              # PREPARE every statement against the schema; check returned
                                     # columns
    scenario, queue = queue.settle(scenario)  # queue.toml's settings over the scenario's
    queue.require(scenario)          # refuse a scenario that calls a statement the queue lacks
    queue.queries                    # name -> Query: the project's statements, the user's in
                                     # their place
    queue.schema_sql                 # the DDL of a run's schema: Lease Lab's bookkeeping + the
                                     # job schema
    queue.where("heartbeat")         # 'myqueue/queries.sql:31', or "Lease Lab's sql/queries.sql"

queries.sql uses the block format of sql/queries.sql: `-- name: NAME`, a one-line description,
`-- params: NAME TYPE, ...`, then the statement. Each block replaces the project's statement of
that name (sim.db.queue.contracts.CONTRACTS says what each must return); a block with no statement
leaves that statement out (a scenario that needs it is refused). Statements not overridden keep
the project's text; with a schema.sql, those that no longer PREPARE against it are left out too.
Lease Lab's bookkeeping tables (dedup markers, ledger) and their statements stay Lease Lab's.
"""

from __future__ import annotations

import dataclasses
import difflib
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from sim.db.base import Rows
from sim.db.errors import QueueDefinitionError
from sim.db.queries import (
    PARAM_TYPES,
    PLACEHOLDER,
    Query,
    bookkeeping_sql,
    job_schema_sql,
    load_queries,
    named_blocks,
)
from sim.db.queue import settings as queue_settings
from sim.db.queue.contracts import (
    BOOKKEEPING,
    CONTRACTS,
    STATUSES,
    bound_params,
    statements_called,
)
from sim.db.queue.files import QUERIES_FILE, SCHEMA_FILE, SETTINGS_FILE, fail_at
from sim.errors import ConfigError
from sim.support.in_words import count

if TYPE_CHECKING:
    from sim.scenario.settings import Scenario


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
    own_rights: bool = False  # run the SQL as the DSN user, not in a sandbox role (sandbox.py)
    _checked: set[str] = field(default_factory=set, repr=False)
    settings: dict[str, object] = field(default_factory=dict)  # queue.toml: {"policy.NAME": value}
    id_oid: int = 20  # the type %(id)s is bound as: the queue's job ids (found by the check)
    own_ids: bool = False  # insert_job returns the id the queue gave the job (found by the check)
    settled: bool = False  # its settings are already in the scenario given with it

    def apply(self, scenario: Scenario) -> Scenario:
        """`scenario` with the queue's own settings (queue.toml) in place of its own; unchanged
        once settled (a caller applied them, and perhaps overrides after them)."""
        if self.settled:
            return scenario
        return queue_settings.apply(
            scenario, self.settings, self.path / SETTINGS_FILE, QueueDefinitionError
        )

    def settle(self, scenario: Scenario) -> tuple[Scenario, QueueDefinition]:
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

    def calling(self, word: str) -> list[str]:
        """file:line of every line of the queue's SQL whose text names `word` (e.g. a function),
        its schema.sql's first: where a refused effect was caused."""
        found = []
        if self.job_schema is not None:
            found += [
                f"{self.file(SCHEMA_FILE)}:{n}"
                for n, line in enumerate(self.job_schema.splitlines(), 1)
                if word in line.lower()
            ]
        for o in self.overrides.values():
            found += [
                f"{self.file()}:{o.sql_line + n}"
                for n, line in enumerate(o.sql.splitlines())
                if word in line.lower()
            ]
        return found

    def sql_of(self, name: str) -> str | None:
        """The statement's text as it will run, None when the queue leaves it out."""
        if name in self.missing:
            return None
        o = self.overrides.get(name)
        return (o.sql or None) if o is not None else load_queries()[name].sql

    # ---- on a server -----------------------------------------------------------------------------

    def check_on(self, dsn: str) -> None:
        """PREPARE the schema and every statement on the server at `dsn`, in a transaction that is
        rolled back (nothing stays behind), and check the columns each returns. Raises
        QueueDefinitionError on the first problem; fills `missing` with the project's statements
        that do not fit a replaced schema. Done once per server."""
        if dsn in self._checked:
            return
        from sim.db.queue.preflight import Check
        from sim.db.queue.sandbox import sandbox

        with sandbox(dsn, own_rights=self.own_rights) as box:
            conn = box.connect(application_name="leaselab:check")
            try:
                self.missing = {
                    n: "left out by an empty block" for n, o in self.overrides.items() if not o.sql
                }
                Check(self, conn.pgconn, box.schema, box.limit).prepare_every_statement()
            finally:
                conn.close()
        self._checked.add(dsn)

    def check_jobs_table(self, rows: Rows) -> None:
        """dump_jobs must speak Lease Lab's words: a status it does not know is the queue's
        mistake."""
        found = sorted({row[3] for row in rows} - set(STATUSES), key=str)
        if found:
            raise QueueDefinitionError(
                f"{self.where('dump_jobs')}: dump_jobs: returned status {found[0]!r}; Lease Lab "
                f"reads {', '.join(STATUSES)} (map your states with CASE ... END)"
            )

    def absent(self, name: str) -> QueueDefinitionError:
        """The error for running statement `name`, which this queue leaves out."""
        return QueueDefinitionError(
            f"{self.file()}: {name}: this queue has none ({self.missing[name]})"
        )

    def require(self, *scenarios: Scenario) -> None:
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


def load_queue(path: str | Path, *, own_rights: bool = False) -> QueueDefinition:
    """Read and check a queue directory's text (no server needed); QueueDefinitionError if bad.
    `own_rights`: run its SQL with the DSN user's own rights instead of in a sandbox role
    (for a server where that user cannot create roles; see sim.db.queue.sandbox)."""
    if not isinstance(path, str | os.PathLike):
        raise QueueDefinitionError(
            f"sql: expected a queue directory (a path), got {type(path).__name__} {path!r:.60}"
        )
    if not isinstance(own_rights, bool):
        raise QueueDefinitionError(
            f"own_rights: expected True or False, got {type(own_rights).__name__} "
            f"{own_rights!r:.60} (True runs the queue's SQL with the DSN user's own rights, "
            "outside the sandbox)"
        )
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
    job_schema = _read(schema) if os.path.lexists(schema) else None
    if job_schema is not None and not job_schema.strip():
        raise QueueDefinitionError(
            f"{schema}:1: empty; remove it to keep Lease Lab's job table, or create yours"
        )
    overrides = parse_overrides(_read(queries), str(queries))
    settings_file = root / SETTINGS_FILE
    settings = (
        queue_settings.read_settings(settings_file, QueueDefinitionError)
        if os.path.lexists(settings_file)
        else {}
    )
    return QueueDefinition(root, overrides, job_schema, own_rights=own_rights, settings=settings)


def _read(path: Path) -> str:
    """A queue file's text: UTF-8 (a byte-order mark is dropped), capped, and without NUL bytes
    (libpq would cut the statement there, while Lease Lab read all of it)."""
    from sim.scenario.limits import MAX_SQL_BYTES
    from sim.support.input_files import read_capped

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
    blocks = named_blocks(text)
    if not blocks:
        raise QueueDefinitionError(
            f"{file}:1: no '-- name: NAME' block; each statement starts with "
            "-- name:, a description line and -- params:"
        )
    out: dict[str, Override] = {}
    for i, block_lines in blocks:
        block = _block(lines, i, i + len(block_lines), file)
        if block.name in out:
            fail_at(
                file, i + 1, block.name, f"defined twice (first at line {out[block.name].line})"
            )
        out[block.name] = block
    return out


def _block(lines: list[str], i: int, end: int, file: str) -> Override:
    name = lines[i].removeprefix("-- name:").strip()
    line = i + 1
    if not name:
        raise QueueDefinitionError(f"{file}:{line}: '-- name:' without a statement name")
    if name in BOOKKEEPING:
        fail_at(
            file,
            line,
            name,
            "is Lease Lab's bookkeeping (dedup markers and ledger stay Lease Lab's); remove it",
        )
    if name not in CONTRACTS:
        close = difflib.get_close_matches(name, CONTRACTS, n=1)
        hint = f" (did you mean {close[0]}?)" if close else ""
        fail_at(
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
        fail_at(
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
            fail_at(file, line, name, "has no statement, and every run needs one")
        if declared:
            fail_at(
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
            fail_at(
                file,
                line,
                name,
                f"parameter declaration {item.strip()!r} must be NAME TYPE, e.g. 'id int'",
            )
        pname, ptype = parts
        if ptype not in PARAM_TYPES:
            fail_at(
                file,
                line,
                name,
                f"parameter {pname} has unknown type {ptype} (int, text, bool, time or interval)",
            )
        out.append((pname, ptype))
    names = [p for p, _ in out]
    for p in names:
        if names.count(p) > 1:
            fail_at(file, line, name, f"parameter {p} is declared twice")
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
    fail_at(file, line, name, f"{head}: {use}")


def _check_params(
    name: str,
    declared: tuple[tuple[str, str], ...],
    sql: str,
    file: str,
    params_line: int,
    sql_line: int,
) -> None:
    bound = dict(bound_params(name))
    for pname, ptype in declared:
        if pname not in bound:
            fail_at(
                file,
                params_line,
                name,
                f"declares {pname}, which Lease Lab does not bind to {name}; "
                f"it binds {_binds(name)}",
            )
        if bound[pname] != ptype:
            fail_at(
                file,
                params_line,
                name,
                f"declares {pname} {ptype}, but Lease Lab binds {pname} as {bound[pname]}",
            )
    used: dict[str, int] = {}
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
            fail_at(
                file,
                at,
                name,
                f"uses %({pname})s, which its -- params: line does not declare{known}",
            )
    for pname, _ in declared:
        if pname not in used:
            fail_at(file, params_line, name, f"declares {pname} but never uses %({pname})s")
    for pname in CONTRACTS[name].required:
        if pname not in used:
            fail_at(
                file,
                sql_line,
                name,
                f"must use %({pname})s (the job Lease Lab means); it uses "
                f"{', '.join(sorted(used)) or 'no parameter'}",
            )


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
    "SETTINGS_FILE",
]
