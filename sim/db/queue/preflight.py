"""A queue directory checked on a server, before anything runs: its schema.sql runs, every
statement PREPAREs against it, the columns each returns fit its contract, and the type of the
queue's job ids is read from the catalog (the first column of dump_jobs). All of it in a scratch
schema inside a transaction that is rolled back (`scratch`, where the probes run too).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Protocol

from psycopg import pq

from sim.db.errors import QueueDefinitionError
from sim.db.queries import PLACEHOLDER, Query, bookkeeping_sql, job_schema_sql, load_queries
from sim.db.queue.contracts import COLUMN_OIDS, CONTRACTS, ID_OIDS, SQL_TYPE, bound_params
from sim.db.queue.files import QUERIES_FILE, SCHEMA_FILE, fail_at
from sim.db.queue.sandbox import TimeBudget
from sim.db.queue.user_sql import query_kind_problem, query_problem, run_schema

TYPE_NAMES = {
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
    1186: "interval",
    1700: "numeric",
    2950: "uuid",
    3802: "jsonb",
    114: "json",
}
_OK = (pq.ExecStatus.COMMAND_OK, pq.ExecStatus.TUPLES_OK)


class QueueStatement(Protocol):
    """A block of a queue's queries.sql as the check reads it (sim.db.queue.directory.Override)."""

    @property
    def sql(self) -> str: ...
    @property
    def sql_line(self) -> int: ...


class CheckedQueue(Protocol):
    """A queue directory as the check reads and completes it (sim.db.queue.directory's
    QueueDefinition, which imports this module: named by its shape, not by an import)."""

    id_oid: int
    own_ids: bool

    @property
    def overrides(self) -> Mapping[str, QueueStatement]: ...
    @property
    def job_schema(self) -> str | None: ...
    @property
    def missing(self) -> dict[str, str]: ...
    def file(self, name: str = ...) -> str: ...
    def where(self, name: str) -> str: ...


# Objects created by this transaction (pg_class rows it wrote) in another schema, or a moved
# search_path.
_ELSEWHERE = """
SELECT 'search_path' WHERE current_schema() IS DISTINCT FROM $1
UNION ALL
(SELECT n.nspname || '.' || c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
 WHERE c.xmin::text = (txid_current() % 4294967296)::text AND n.nspname <> $1
   AND n.nspname NOT LIKE 'pg_toast%' ORDER BY 1 LIMIT 1)
"""


def execute(pg: pq.abc.PGconn, text: str) -> pq.abc.PGresult:
    return pg.exec_(text.encode())


def ok(result: pq.abc.PGresult, what: str = "set up the check") -> None:
    if result.status not in _OK:
        raise QueueDefinitionError(f"PostgreSQL refused to {what}: {message(result)}")


@contextmanager
def scratch(
    queue: CheckedQueue,
    pg: pq.abc.PGconn,
    schema: str,
    limit: float | None,
    budget: TimeBudget | None = None,
) -> Iterator[None]:
    """Lease Lab's bookkeeping and the queue's job tables in `schema` (a sandbox's:
    sim.db.queue.sandbox, which `pg` is logged in to), search_path set and TimeZone UTC (as a run's
    connections), inside a transaction rolled back on exit: nothing stays on the server. schema.sql
    runs statement by statement under the sandbox's rules and time limit (sim.db.queue.user_sql)."""
    ok(execute(pg, "BEGIN"))
    try:
        ok(execute(pg, f'SET LOCAL search_path TO "{schema}"'))
        ok(execute(pg, "SET LOCAL TimeZone TO 'UTC'"))
        ok(execute(pg, bookkeeping_sql()))
        if queue.job_schema is None:
            ok(execute(pg, job_schema_sql()))
        else:
            run_schema(pg, queue.job_schema, queue.file(SCHEMA_FILE), limit, budget)
            _own_schema_only(queue, pg, schema)
        yield
    finally:
        execute(pg, "ROLLBACK")


def _own_schema_only(queue: CheckedQueue, pg: pq.abc.PGconn, schema: str) -> None:
    """schema.sql must create its objects in the run's own schema, and leave search_path there."""
    result = pg.exec_params(_ELSEWHERE.encode(), [schema.encode()])
    ok(result)
    if result.ntuples:
        # psycopg types a value as bytes | None; both branches of _ELSEWHERE return text
        where = result.get_value(0, 0).decode()  # type: ignore[union-attr]
        what = "moves search_path" if where == "search_path" else f"creates {where}"
        word = where.rpartition(".")[2].lower()
        assert queue.job_schema is not None  # checked only for a queue with a schema.sql
        lines = queue.job_schema.lower().splitlines()
        line = next((i + 1 for i, text in enumerate(lines) if word in text), 1)
        raise QueueDefinitionError(
            f"{queue.file(SCHEMA_FILE)}:{line}: {what} outside the run's own schema; "
            "keep names unqualified (Lease Lab creates everything in a schema of its own "
            "and drops it afterwards)"
        )


class Check:
    """PREPARE every statement in the scratch schema and check what it returns."""

    def __init__(
        self, queue: CheckedQueue, pg: pq.abc.PGconn, schema: str, limit: float | None
    ) -> None:
        self.queue, self.pg, self.schema, self.limit = queue, pg, schema, limit
        self.budget = TimeBudget()  # the whole check's share of the queue's SQL time

    def prepare_every_statement(self) -> None:
        q = self.queue
        for name, o in q.overrides.items():  # what each statement is, before any runs
            if o.sql:
                self._kind(name, o)
        with scratch(q, self.pg, self.schema, self.limit, self.budget):
            # the type of the queue's ids first (what every %(id)s is bound as); a dump_jobs that
            # does not PREPARE gets its error in its turn below
            dump = self._statement("dump_jobs", quiet=True)
            if dump:
                q.id_oid = _bound_as(dump[0][1])
            columns = {}
            for name in [*q.overrides, *(n for n in CONTRACTS if n not in q.overrides)]:
                columns[name] = self._statement(name)  # the user's first
            q.own_ids = bool(columns["insert_job"])
            self._ids_fit(columns["insert_job"])

    def _kind(self, name: str, o: QueueStatement) -> None:
        """A named statement must be one query, as PostgreSQL's parser reads its wire form."""
        from sim.db.wire import statement

        wire = statement(Query(name, "", bound_params(name), o.sql), self.queue.id_oid)
        problem = query_kind_problem(wire.text.decode())
        if problem:
            fail_at(self.queue.file(), o.sql_line, name, problem)

    def _ids_fit(self, inserted: list[tuple[str, int]]) -> None:
        """insert_job returns the id the queue gave the job, of the ids' type, or nothing when the
        ids are the model's own numbers (integers)."""
        q = self.queue
        kind = TYPE_NAMES.get(q.id_oid, f"type OID {q.id_oid}")
        if inserted and _id_kind(inserted[0][1]) != _id_kind(q.id_oid):
            got = TYPE_NAMES.get(inserted[0][1], f"type OID {inserted[0][1]}")
            fail_at(
                q.file(),
                q.overrides["insert_job"].sql_line,
                "insert_job",
                f"returns {inserted[0][0]} as {got}, but dump_jobs returns the job ids as {kind}; "
                "insert_job returns the id it gave the job (contract: insert_job)",
            )
        o = q.overrides.get("insert_job")
        if not inserted and o is not None and "id" not in PLACEHOLDER.findall(o.sql):
            fail_at(
                q.file(),
                o.sql_line,
                "insert_job",
                "neither uses %(id)s nor returns the id it gave the job (RETURNING id): Lease Lab "
                "cannot tell its jobs apart (contract: insert_job)",
            )
        if not inserted and q.id_oid not in COLUMN_OIDS["int"]:
            o = q.overrides.get("insert_job")
            fail_at(
                q.file(),
                o.sql_line if o else 1,
                "insert_job",
                f"the job ids are {kind} (dump_jobs, column 1), so insert_job must return the id "
                "it gave the job (RETURNING id): Lease Lab binds %(id)s as that id afterwards "
                "(contract: insert_job)",
            )

    def _statement(self, name: str, quiet: bool = False) -> list[tuple[str, int]]:
        """PREPARE statement `name`; its columns (name, type OID), [] when it is not available
        (or, `quiet`, when it does not PREPARE: nothing is reported then)."""
        from sim.db.wire import statement  # the wire form a run sends: $n placeholders, typed

        q = self.queue
        o = q.overrides.get(name)
        if o is not None and not o.sql:
            return []
        sql = o.sql if o is not None else load_queries()[name].sql
        wire = statement(Query(name, "", bound_params(name), sql), q.id_oid)
        text = wire.text.decode()
        ok(execute(self.pg, "SAVEPOINT leaselab_check"))
        stmt = f"leaselab_check_{name}".encode()
        result = self.pg.prepare(stmt, wire.text, list(wire.oids))
        if result.status != pq.ExecStatus.COMMAND_OK:
            ok(execute(self.pg, "ROLLBACK TO SAVEPOINT leaselab_check"))
            if quiet:
                return []
            if o is None:  # the project's text under the user's schema: not available, not an error
                why = (
                    f"not in {QUERIES_FILE}, and Lease Lab's text does not fit {SCHEMA_FILE}: "
                    f"{message(result)}"
                )
                if not CONTRACTS[name].optional:
                    raise QueueDefinitionError(
                        f"{q.file()}: {name}: {why}; every run needs it: define it in "
                        f"{QUERIES_FILE}"
                    )
                q.missing[name] = why
                return []
            line = o.sql_line + text[: position(result)].count("\n")
            against = (
                q.file(SCHEMA_FILE)
                if q.job_schema is not None
                else "Lease Lab's job table (sql/schema.sql)"
            )
            fail_at(
                q.file(),
                line,
                name,
                f"PostgreSQL cannot PREPARE it against {against}: {message(result)}",
            )
        if o is not None:
            problem = query_problem(
                self.pg, stmt, wire.oids, self.limit, q.where(name), self.budget
            )
            if problem:
                fail_at(q.file(), o.sql_line, name, problem)
        described = self.pg.describe_prepared(stmt)
        columns = [
            # psycopg types a name as bytes | None: None only past nfields
            (described.fname(i).decode(), described.ftype(i))  # type: ignore[union-attr]
            for i in range(described.nfields)
        ]
        execute(self.pg, f"DEALLOCATE leaselab_check_{name}")
        ok(execute(self.pg, "RELEASE SAVEPOINT leaselab_check"))
        if o is not None:
            problem = columns_problem(name, columns, q.id_oid)
            if problem:
                fail_at(q.file(), o.sql_line, name, problem)
        return columns


def _bound_as(oid: int) -> int:
    """The type %(id)s is bound as for ids of type `oid`: bigint, text or the type itself."""
    kind = _id_kind(oid)
    return 20 if kind == "int" else 25 if kind == "text" else oid


def _id_kind(oid: int) -> str:
    return next((kind for kind in ("int", "text") if oid in COLUMN_OIDS[kind]), str(oid))


def columns_problem(name: str, columns: list[tuple[str, int]], id_oid: int = 20) -> str | None:
    """Why the returned columns do not fit the contract, or None. The job's id is any integer,
    text or uuid type (the first column of dump_jobs sets which); every other id column of the
    queue's must have that type too."""
    c = CONTRACTS[name]
    wanted = ", ".join(f"{col} {SQL_TYPE[kind]}" for col, kind in c.returns)
    got = ", ".join(col for col, _ in columns) or "no columns"
    if c.exact and len(columns) != len(c.returns) or len(columns) < len(c.returns):
        how = "exactly" if c.exact else "at least"
        extra = " (add RETURNING ...)" if not columns else ""
        return (
            f"returns {len(columns)} column(s) ({got}); Lease Lab reads {how} {len(c.returns)}: "
            f"{wanted}{extra}"
        )
    for i, ((col, kind), (got_name, oid)) in enumerate(zip(c.returns, columns, strict=False)):
        if col == "id" and name == "dump_jobs":
            if oid not in ID_OIDS:
                return (
                    f"column 1 ({got_name}) is {TYPE_NAMES.get(oid, f'type OID {oid}')}; Lease "
                    "Lab reads the job's id as an integer, text or uuid (contract: dump_jobs)"
                )
        elif col == "id":
            if _id_kind(oid) != _id_kind(id_oid):
                return (
                    f"column {i + 1} ({got_name}) is {TYPE_NAMES.get(oid, f'type OID {oid}')}; "
                    f"the job ids are {TYPE_NAMES.get(id_oid, f'type OID {id_oid}')} (dump_jobs, "
                    "column 1): return the job's id as dump_jobs does"
                )
        elif oid not in COLUMN_OIDS[kind]:
            return (
                f"column {i + 1} ({got_name}) is {TYPE_NAMES.get(oid, f'type OID {oid}')}; "
                f"Lease Lab reads it as {col} {SQL_TYPE[kind]} "
                f"(cast it: ...::{SQL_TYPE[kind]})"
            )
    return None


def position(result: pq.abc.PGresult) -> int:
    raw = result.error_field(pq.DiagnosticField.STATEMENT_POSITION)
    return max(0, int(raw) - 1) if raw else 0


def message(result: pq.abc.PGresult) -> str:
    primary = result.error_field(pq.DiagnosticField.MESSAGE_PRIMARY) or result.error_message or b""
    return " ".join(primary.decode(errors="replace").split())
