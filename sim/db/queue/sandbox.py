"""The sandbox of a queue's own SQL: PostgreSQL's own privileges, not Lease Lab's reading of the
text, keep the user's statements inside the run's schema.

Each run (and each check of a queue directory) gets a role of its own, `leaselab_<hex>`: no
superuser, CREATEROLE, CREATEDB, REPLICATION or BYPASSRLS, member of no other role (so not of
pg_execute_server_program, pg_write_server_files, ...), owner of the run's schema and of nothing
else, with a statement_timeout. Every statement of the user's SQL (schema.sql, the check, the
runs, live mode) runs on a connection logged in as that role. A SET ROLE on the caller's own
session would not do: when the session's user is a superuser, the user's SQL could undo it
(RESET ROLE, set_config('role', ...), SET SESSION AUTHORIZATION). So the role logs in, with a
random password of this run's alone (sent hashed), and it is dropped, with its schema, when the
run ends; a run that died is cleaned up by the next start (sim.db.leftovers).

Creating the role needs CREATEROLE (or a superuser). Without it `--sql` is refused in one line,
unless the caller accepts that the queue's SQL runs with the DSN user's own rights
(`own_rights=True`, the CLI's --own-rights): the schema is then the caller's, as for Lease Lab's
own SQL.

    from sim.db.queue.sandbox import sandbox
    with sandbox(dsn) as box:             # the role and its schema; both dropped on exit
        with box.connect() as conn:       # logged in as the role, search_path = its schema
            conn.execute("EXPLAIN ...")   # e.g. probing a user's statement under its rights
"""

from __future__ import annotations

import contextlib
import re
import secrets
import select
import time
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg import pq, sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from sim.db import leftovers
from sim.db.base import Rows
from sim.db.errors import ServerUnavailableError
from sim.db.server import connect_dsn, connection_error, describe_dsn, open_connection, unavailable
from sim.db.sql_split import split_statements
from sim.errors import ConfigError
from sim.scenario.limits import (
    sql_total_timeout,
    sql_total_timeout_words,
    statement_timeout,
    statement_timeout_words,
)

if TYPE_CHECKING:
    from psycopg.abc import Params

OWN_RIGHTS_FLAG = "--own-rights"
LOCK_TIMEOUT = "5s"  # an administration statement never waits longer than this on a lock
ADMIN_STATEMENT_TIMEOUT = "60s"  # ... nor runs longer than this
TEMP_FILE_LIMIT = "1GB"  # temporary files of one server process of the run's role (superuser only)
_BOUNDED: weakref.WeakSet[psycopg.Connection] = (
    weakref.WeakSet()
)  # admin connections admin_session() bounded
GONE_S = 10.0  # the role's server processes must have exited this long after being terminated

# Where the run's role could reach outside its schema through privileges granted to PUBLIC: a
# database or schema it may create in, a table it may write, a SECURITY DEFINER function it may
# call (it runs with its owner's rights). Schemas of other runs' roles (leaselab_<hex>, owned by the
# role of that name) are sandboxes like this one, not the user's exposure.
_EXPOSED = """
WITH sandboxes AS (
  SELECT n.oid FROM pg_namespace n JOIN pg_roles r ON r.oid = n.nspowner
   WHERE n.nspname = r.rolname AND r.rolname ~ '^leaselab_[0-9a-f]{12}$' AND NOT r.rolsuper)
SELECT 'CREATE on database ' || quote_ident(current_database())
 WHERE has_database_privilege(%(role)s, current_database(), 'CREATE')
UNION ALL
(SELECT 'CREATE on schema ' || quote_ident(nspname) FROM pg_namespace
  WHERE nspname <> %(schema)s AND oid NOT IN (SELECT oid FROM sandboxes)
    AND has_schema_privilege(%(role)s, oid, 'CREATE') ORDER BY 1 LIMIT 1)
UNION ALL
(SELECT 'write access to table ' || quote_ident(n.nspname) || '.' || quote_ident(c.relname)
   FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
  WHERE n.nspname <> %(schema)s AND c.relkind IN ('r', 'p', 'v', 'f')
    AND n.nspname NOT IN ('pg_catalog', 'information_schema')
    AND n.oid NOT IN (SELECT oid FROM sandboxes)
    AND has_table_privilege(%(role)s, c.oid, 'INSERT, UPDATE, DELETE, TRUNCATE')
  ORDER BY 1 LIMIT 1)
UNION ALL
(SELECT 'EXECUTE on SECURITY DEFINER function(s) '
        || string_agg(f, ', ' ORDER BY f) FILTER (WHERE k <= 3)
        || CASE WHEN count(*) > 3 THEN format(' and %%s more', count(*) - 3) ELSE '' END
   FROM (SELECT p.oid::regprocedure::text AS f,
                row_number() OVER (ORDER BY p.oid::regprocedure::text) AS k
           FROM pg_proc p
          WHERE p.prosecdef AND p.pronamespace NOT IN (SELECT oid FROM sandboxes)
            AND p.pronamespace <> (SELECT oid FROM pg_namespace WHERE nspname = %(schema)s)
            AND has_function_privilege(%(role)s, p.oid, 'EXECUTE')) AS d
 HAVING count(*) > 0)
"""
_BACKENDS = "SELECT pid FROM pg_stat_activity WHERE usename = %s AND pid <> pg_backend_pid()"


class SandboxRefused(ConfigError):
    """The server cannot give a queue's SQL a sandbox (and the caller did not accept its
    own rights)."""


class StatementLimitError(ConfigError):
    """A statement of the user's SQL ran past the statement time limit (it was cancelled)."""


class SqlTotalLimitError(StatementLimitError):
    """The user's SQL, all its statements together, ran past the total time limit."""


@dataclass
class Sandbox:
    """A run's schema, and the role the user's SQL runs as (None: the DSN user's own rights)."""

    admin_dsn: str
    schema: str
    role: str | None
    password: str = ""
    limit: float | None = None  # statement time limit in seconds (None: Lease Lab's SQL only)

    @property
    def dsn(self) -> str:
        """The DSN the user's SQL connects with: the role's (with its one-run password), or the
        DSN user's own."""
        if self.role is None:
            return self.admin_dsn
        return make_conninfo(self.admin_dsn, user=self.role, password=self.password)

    def connect(
        self, application_name: str = "leaselab:sandbox", **kwargs: Any
    ) -> psycopg.Connection:
        """A connection as the role (or the DSN user), search_path set to the run's schema, every
        statement bounded by the statement time limit."""
        try:
            conn = open_connection(
                self.dsn, autocommit=True, application_name=application_name, **kwargs
            )
        except ServerUnavailableError as exc:
            raise self._not_admitted(exc) from None
        try:
            conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(self.schema)))
            if self.role is None and self.limit is not None:  # a role has it as its own setting
                conn.execute(
                    sql.SQL("SET statement_timeout = {}").format(
                        sql.Literal(int(self.limit * 1000))
                    )
                )
        except psycopg.OperationalError as exc:
            conn.close()
            raise connection_error(self.dsn, exc) from None
        return conn

    def _not_admitted(self, exc: ServerUnavailableError) -> Exception:
        """A server whose pg_hba.conf admits only known users rejects the run's role: say so."""
        text = str(exc)
        if self.role is None or not re.search(r"pg_hba\.conf|no pg_hba|rejects connection", text):
            return exc
        entry = text.partition("pg_hba.conf")[2].split(";")[0].strip(" :") or "no entry"
        return SandboxRefused(
            f"--sql: PostgreSQL at {describe_dsn(self.admin_dsn)} does not admit the run's role "
            f"{self.role} (pg_hba.conf: {entry}); a queue's SQL runs as a role of each run's "
            "own, leaselab_<12 hex digits>: admit them in pg_hba.conf (e.g. a line for users "
            "matching /^leaselab_), or pass "
            f"{OWN_RIGHTS_FLAG} to run your SQL with your own rights"
        )

    def drop(self, admin: psycopg.Connection, *, keep_schema: bool = False) -> None:
        """End every session of the role, then drop the schema and the role; or, kept, leave the
        schema with its role, which may no longer log in and whose grants to anyone else are
        revoked (never handed to the DSN user: the queue's functions would run with its rights).
        Safe to call twice."""
        with _admin_errors(self.admin_dsn):
            admin_session(admin)
            if self.role is not None:
                terminate(admin, self.role)
                leftovers.rollback_prepared(admin, self.role)
            if keep_schema:
                if self.role is not None:
                    _shut(admin, self.role, self.schema)
                leftovers.mark_kept(admin, self.schema, self.role)
                return
            try:
                admin.execute(
                    sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(self.schema))
                )
            except (psycopg.errors.LockNotAvailable, psycopg.errors.QueryCanceled) as exc:
                raise unavailable(
                    self.admin_dsn,
                    f"could not drop the run's schema {self.schema} within {LOCK_TIMEOUT} "
                    f"({exc.diag.message_primary}: another session holds a lock on it)",
                    "end that session; the next start removes the schema and its role",
                ) from None
            if self.role is not None:
                role = sql.Identifier(self.role)
                [(exists,)] = admin.execute(
                    "SELECT count(*) FROM pg_roles WHERE rolname = %s", (self.role,)
                ).fetchall()
                if exists:
                    admin.execute(sql.SQL("DROP OWNED BY {}").format(role))
                    admin.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(role))


# Every grant on the kept schema and its objects to anyone but their owner, and the members of the
# role (PostgreSQL 15 lets a role that logs in grant itself to others).
_GRANTS = """
WITH s AS (SELECT oid FROM pg_namespace WHERE nspname = %(schema)s)
SELECT 'SCHEMA', quote_ident(%(schema)s), a.grantee
  FROM pg_namespace n, aclexplode(coalesce(n.nspacl, acldefault('n', n.nspowner))) a
 WHERE n.oid = (SELECT oid FROM s) AND a.grantee <> n.nspowner
UNION
SELECT CASE c.relkind WHEN 'S' THEN 'SEQUENCE' ELSE 'TABLE' END, c.oid::regclass::text, a.grantee
  FROM pg_class c, aclexplode(c.relacl) a
 WHERE c.relnamespace = (SELECT oid FROM s) AND a.grantee <> c.relowner
   AND c.relowner = %(role)s::regrole
UNION
SELECT 'ROUTINE', p.oid::regprocedure::text, a.grantee
  FROM pg_proc p, aclexplode(coalesce(p.proacl, acldefault('f', p.proowner))) a
 WHERE p.pronamespace = (SELECT oid FROM s) AND a.grantee <> p.proowner
"""


def _shut(admin: psycopg.Connection, role_name: str, schema: str) -> None:
    """A kept schema's role: no login, no password, no members but the DSN user, nothing outside
    its schema (its large objects go), and every grant it made on its schema and objects (to
    PUBLIC, to other roles, EXECUTE on its functions) revoked."""
    role = sql.Identifier(role_name)
    admin.execute(sql.SQL("ALTER ROLE {} NOLOGIN PASSWORD NULL").format(role))
    grants = admin.execute(_GRANTS, {"schema": schema, "role": role_name}).fetchall()
    names: dict[int, str] = dict(admin.execute("SELECT oid, rolname FROM pg_roles").fetchall())
    with admin.transaction():
        admin.execute(sql.SQL("SET LOCAL ROLE {}").format(role))  # revoke as the grantor
        for kind, target, grantee in grants:
            who = sql.SQL("PUBLIC") if grantee == 0 else sql.Identifier(names[grantee])
            admin.execute(
                sql.SQL("REVOKE ALL ON {} {} FROM {}").format(sql.SQL(kind), sql.SQL(target), who)
            )
        admin.execute(
            "SELECT lo_unlink(oid) FROM pg_largeobject_metadata WHERE lomowner = %s::regrole",
            (role_name,),
        )
    members = admin.execute(
        "SELECT m.rolname FROM pg_auth_members a JOIN pg_roles m ON m.oid = a.member "
        "WHERE a.roleid = %s::regrole AND m.rolname <> current_user",
        (role_name,),
    ).fetchall()
    for (member,) in members:
        admin.execute(sql.SQL("REVOKE {} FROM {}").format(role, sql.Identifier(member)))


def create_bookkeeping(admin: psycopg.Connection, box: Sandbox, text: str) -> None:
    """Lease Lab's bookkeeping tables (dedup markers, ledger) in the run's schema, owned by the DSN
    user, not the role: the queue's SQL may read them and add rows (the protocol's statements run
    as the role), never alter, trigger, update or delete them (the markers' purge excepted)."""
    assert box.role is not None, "bookkeeping apart from the role needs a role"
    role = sql.Identifier(box.role)
    with _admin_errors(box.admin_dsn), admin.transaction():
        admin.execute(sql.SQL("SET LOCAL search_path TO {}").format(sql.Identifier(box.schema)))
        admin.execute(text)
        tables = sql.SQL("ledger, processed_events")
        admin.execute(sql.SQL("GRANT SELECT, INSERT ON {} TO {}").format(tables, role))
        admin.execute(sql.SQL("GRANT DELETE ON processed_events TO {}").format(role))


def kept_reader(admin: psycopg.Connection, dsn: str, schema: str) -> Sandbox | None:
    """For a kept schema that its own role owns (a sandboxed run's): that role, allowed to log in
    with a fresh password until close_reader(), so that Lease Lab reads the schema as the role (a
    view or function of the queue runs with the role's rights, not the DSN user's). None for a
    schema of Lease Lab's own SQL."""
    row = admin.execute(
        "SELECT r.rolname FROM pg_namespace n JOIN pg_roles r ON r.oid = n.nspowner "
        "WHERE n.nspname = %s AND r.rolname = n.nspname AND NOT r.rolsuper",
        (schema,),
    ).fetchone()
    if row is None:
        return None
    box = Sandbox(dsn, schema, row[0], secrets.token_urlsafe(24), statement_timeout())
    hashed = admin.pgconn.encrypt_password(box.password.encode(), row[0].encode()).decode()
    with _admin_errors(dsn):
        admin.execute(
            sql.SQL("ALTER ROLE {} LOGIN PASSWORD {}").format(
                sql.Identifier(row[0]), sql.Literal(hashed)
            )
        )
    return box


def close_reader(admin: psycopg.Connection, box: Sandbox) -> None:
    """End the reader's sessions; its role may no longer log in."""
    assert box.role is not None, "a reader is a role"
    with _admin_errors(box.admin_dsn):
        terminate(admin, box.role)
        role = sql.Identifier(box.role)
        admin.execute(sql.SQL("ALTER ROLE {} NOLOGIN PASSWORD NULL").format(role))


def admin_session(admin: psycopg.Connection) -> None:
    """Bound every statement of an administration connection: a lock it cannot get within
    LOCK_TIMEOUT, or a statement past ADMIN_STATEMENT_TIMEOUT, fails instead of waiting for ever
    (a prepared transaction or a paused process could hold a lock indefinitely)."""
    if admin in _BOUNDED:
        return
    admin.execute(sql.SQL("SET lock_timeout = {}").format(sql.Literal(LOCK_TIMEOUT)))
    admin.execute(
        sql.SQL("SET statement_timeout = {}").format(sql.Literal(ADMIN_STATEMENT_TIMEOUT))
    )
    _BOUNDED.add(admin)


def create(
    admin: psycopg.Connection,
    dsn: str,
    *,
    schema: str | None = None,
    own_rights: bool = False,
    user_sql: bool = True,
    keep: bool = False,
    role_settings: dict[str, str] | None = None,
) -> Sandbox:
    """A new schema (and, for the user's SQL unless `own_rights`, the role that owns it) on the
    server of `admin`, a connection of the DSN user (autocommit). `user_sql=False`: Lease Lab's
    own SQL only, no role and no statement limit. `keep`: the schema is to be kept after the run
    (--keep-schema), even if the run dies. `role_settings`: further settings the role gets at
    login (e.g. deadlock_timeout, which only a superuser may set). Leftovers of runs that died are
    cleaned up first, once per server and process."""
    admin_session(admin)
    leftovers.clean_once(admin, dsn)
    name = schema or f"leaselab_{secrets.token_hex(6)}"
    with_role = user_sql and not own_rights
    box = Sandbox(
        dsn,
        name,
        name if with_role else None,
        secrets.token_urlsafe(24) if with_role else "",
        statement_timeout() if user_sql else None,
    )
    with _admin_errors(dsn):
        if with_role:
            _refuse_without_createrole(admin, dsn)
        try:
            with admin.transaction():
                if with_role:
                    _create_role(admin, box, role_settings or {})
                owner = (
                    sql.SQL(" AUTHORIZATION {}").format(sql.Identifier(box.role))
                    if box.role is not None
                    else sql.SQL("")
                )
                admin.execute(sql.SQL("CREATE SCHEMA {}{}").format(sql.Identifier(name), owner))
                if keep:  # a run that dies keeps it too
                    leftovers.mark_kept(admin, name, box.role)
                elif box.role is None:  # a role's mark is on the role, where it cannot write
                    leftovers.mark(admin, "SCHEMA", name)
                if with_role:
                    _refuse_exposure(admin, box)
        except psycopg.errors.InsufficientPrivilege as exc:
            info = conninfo_to_dict(dsn)
            raise unavailable(
                dsn,
                f"cannot CREATE SCHEMA ({exc.diag.message_primary})",
                f"grant it with GRANT CREATE ON DATABASE {info.get('dbname', '<db>')} "
                f"TO {info.get('user', '<user>')}, or use another DSN",
            ) from None
        except psycopg.errors.DuplicateSchema:
            from sim.db.errors import DatabaseError

            raise DatabaseError(
                f"schema {name} already exists at {describe_dsn(dsn)}; "
                "Lease Lab never reuses a schema: choose another name or drop it"
            ) from None
    return box


@contextlib.contextmanager
def sandbox(
    dsn: str | None = None, *, own_rights: bool = False, reads: str | None = None
) -> Iterator[Sandbox]:
    """A sandbox for the user's SQL on the server at `dsn` (the embedded one when None), dropped
    (role and schema, with any grant) on exit. `reads`: an existing schema whose tables the role
    may also read (USAGE and SELECT only)."""
    dsn = connect_dsn(dsn)
    admin = open_connection(dsn, autocommit=True, application_name="leaselab:admin")
    try:
        box = create(admin, dsn, own_rights=own_rights)
        try:
            if reads is not None:
                schema, role = sql.Identifier(reads), sql.Identifier(str(box.role))
                admin.execute(sql.SQL("GRANT USAGE ON SCHEMA {} TO {}").format(schema, role))
                admin.execute(
                    sql.SQL("GRANT SELECT ON ALL TABLES IN SCHEMA {} TO {}").format(schema, role)
                )
            yield box
        finally:
            box.drop(admin)
    finally:
        admin.close()


def terminate(admin: psycopg.Connection, role: str) -> None:
    """End every server process logged in as `role` and wait until they are gone."""
    deadline = time.monotonic() + GONE_S
    while pids := [pid for (pid,) in admin.execute(_BACKENDS, (role,)).fetchall()]:
        leftovers.wake(admin, pids)
        admin.execute("SELECT pg_terminate_backend(pid) FROM unnest(%s::int[]) AS t(pid)", (pids,))
        if time.monotonic() > deadline:
            raise unavailable(
                admin.info.dsn,
                f"server processes {pids} of role {role} did not exit within {GONE_S:g} s",
                "stop them by hand (SELECT pg_terminate_backend(...))",
            )
        time.sleep(0.01)


def _refuse_without_createrole(admin: psycopg.Connection, dsn: str) -> None:
    [(user, superuser, createrole)] = admin.execute(
        "SELECT current_user, rolsuper, rolcreaterole FROM pg_roles WHERE rolname = current_user"
    ).fetchall()
    if not (superuser or createrole):
        raise SandboxRefused(
            f"--sql: user {user} at {describe_dsn(dsn)} cannot create roles (it has neither "
            f"CREATEROLE nor SUPERUSER), and a queue's SQL runs as a role of the run's own that "
            f"may touch only the run's schema; grant it (ALTER ROLE {user} CREATEROLE) or pass "
            f"{OWN_RIGHTS_FLAG} to run your SQL with {user}'s own rights"
        )


def _create_role(admin: psycopg.Connection, box: Sandbox, settings: dict[str, str]) -> None:
    role_name, limit = box.role, box.limit
    if role_name is None or limit is None:  # create() makes a role only for the user's SQL
        raise ValueError(f"sandbox {box.schema}: a role needs a name and a statement time limit")
    role = sql.Identifier(role_name)
    hashed = admin.pgconn.encrypt_password(box.password.encode(), role_name.encode()).decode()
    admin.execute(
        sql.SQL(
            "CREATE ROLE {} LOGIN PASSWORD {} NOSUPERUSER NOCREATEDB NOCREATEROLE NOINHERIT "
            "NOREPLICATION NOBYPASSRLS"
        ).format(role, sql.Literal(hashed))
    )
    leftovers.mark(admin, "ROLE", role_name)
    timeouts = {"statement_timeout": str(int(limit * 1000))}
    if admin.info.server_version >= 140000:  # a server process notices a client that died
        timeouts["client_connection_check_interval"] = "1000"
    [(superuser,)] = admin.execute(
        "SELECT rolsuper FROM pg_roles WHERE rolname = current_user"
    ).fetchall()
    if superuser:  # only a superuser may bound the role's temporary files
        timeouts["temp_file_limit"] = TEMP_FILE_LIMIT
    for name, value in {**timeouts, **settings, "search_path": box.schema}.items():
        admin.execute(
            sql.SQL("ALTER ROLE {} SET {} = {}").format(
                role, sql.Identifier(name), sql.Literal(value)
            )
        )
    if not superuser:  # CREATEROLE: become a member, to give it the schema and drop it afterwards
        admin.execute(sql.SQL("GRANT {} TO CURRENT_USER").format(role))
    [(can_connect,)] = admin.execute(
        "SELECT has_database_privilege(%s, current_database(), 'CONNECT')", (role_name,)
    ).fetchall()
    if not can_connect:
        admin.execute(
            sql.SQL("GRANT CONNECT ON DATABASE {} TO {}").format(
                sql.Identifier(admin.info.dbname), role
            )
        )


def _refuse_exposure(admin: psycopg.Connection, box: Sandbox) -> None:
    """SandboxRefused when privileges granted to PUBLIC would let the role write outside
    its schema."""
    row = admin.execute(_EXPOSED, {"role": box.role, "schema": box.schema}).fetchone()
    if row:
        raise SandboxRefused(
            f"--sql: every role at {describe_dsn(box.admin_dsn)} has {row[0]} (granted to PUBLIC), "
            "so a queue's SQL could act outside the run's schema; revoke it from PUBLIC, or pass "
            f"{OWN_RIGHTS_FLAG} to run your SQL with your own rights"
        )


@contextlib.contextmanager
def _admin_errors(dsn: str) -> Iterator[None]:
    try:
        yield
    except psycopg.OperationalError as exc:
        raise connection_error(dsn, exc) from None


# ---- a statement with a time limit, on the wire --------------------------------------------------

MAX_RESULTS = 10_000  # results one send may produce (a script of many statements): more is refused
_COPY = (pq.ExecStatus.COPY_OUT, pq.ExecStatus.COPY_IN, pq.ExecStatus.COPY_BOTH)


class TimeBudget:
    """The total time a queue's SQL may take in one check or one run, over all its statements
    ($LEASELAB_SQL_TOTAL_TIMEOUT): each statement has its own limit, their sum this one."""

    def __init__(self, total: float | None = None):
        self.total = sql_total_timeout() if total is None else total
        self.used = 0.0

    def left(self) -> float:
        return max(0.0, self.total - self.used)

    def charge(self, seconds: float, what: str) -> None:
        """Count `seconds` of the queue's SQL; SqlTotalLimitError naming `what` once past."""
        self.used += seconds
        if self.used > self.total:
            raise SqlTotalLimitError(f"{what}: {sql_total_timeout_words(self.used)}")


def bounded(
    pg: pq.abc.PGconn,
    send: Callable[[], None],
    limit: float,
    what: str,
    *,
    budget: TimeBudget | None = None,
    stream: bool = False,
) -> list[pq.abc.PGresult]:
    """Send a statement (`send` calls pg.send_*) and collect its results, waiting at most `limit`
    seconds (plus a second's grace for the server's own statement_timeout to speak first), and no
    longer than what is left of `budget`. Past either, the statement is cancelled and
    StatementLimitError (or SqlTotalLimitError) names `what` and the limit: the user's SQL may have
    turned the server's timeout off (set_config), this one it cannot. `stream`: rows are read one
    at a time and dropped (only the results without rows are returned), so a statement returning
    millions of rows costs no memory. A COPY that reached the wire is ended and refused."""
    started = time.monotonic()
    send()
    if stream:
        pg.set_single_row_mode()
    pg.flush()
    own = limit + 1.0
    wait = min(own, budget.left() + 0.5) if budget is not None else own
    deadline = started + wait
    results: list[pq.abc.PGresult] = []
    try:
        while True:
            pg.consume_input()
            while not pg.is_busy():
                result = pg.get_result()
                if result is None:
                    return results
                if result.status in _COPY:
                    _end_copy(pg, result)
                    raise StatementLimitError(
                        f"{what}: COPY moves data to or from the client, which a queue's SQL may "
                        "not; it was ended (load rows with INSERT)"
                    )
                if result.status != pq.ExecStatus.SINGLE_TUPLE:
                    results.append(result)
                    if len(results) > MAX_RESULTS:
                        _cancel(pg)
                        raise StatementLimitError(
                            f"{what}: produced more than {MAX_RESULTS:,} results; it was cancelled"
                        )
            left = deadline - time.monotonic()
            if left <= 0:
                _cancel(pg)
                if wait < own:
                    raise SqlTotalLimitError(f"{what}: {sql_total_timeout_words()}")
                raise StatementLimitError(f"{what}: {_past_limit()}")
            select.select([pg.socket], [], [], min(left, 0.5))
    finally:
        if budget is not None:
            budget.charge(time.monotonic() - started, what)


def _cancel(pg: pq.abc.PGconn) -> None:
    pg.get_cancel().cancel()
    _drain(pg)


def _end_copy(pg: pq.abc.PGconn, result: pq.abc.PGresult) -> None:
    """End a COPY in progress without reading its data into memory."""
    if result.status == pq.ExecStatus.COPY_IN:
        pg.put_copy_end(b"a queue's SQL may not COPY")
        pg.flush()
    else:
        pg.get_cancel().cancel()
        deadline = time.monotonic() + GONE_S
        while time.monotonic() < deadline:
            size, _ = pg.get_copy_data(1)
            if size == -1 or size == -2:
                break
            if size == 0:
                select.select([pg.socket], [], [], 0.1)
                pg.consume_input()
    _drain(pg)


def _drain(pg: pq.abc.PGconn) -> None:
    deadline = time.monotonic() + GONE_S
    while time.monotonic() < deadline:
        while pg.is_busy() and time.monotonic() < deadline:
            select.select([pg.socket], [], [], 0.1)
            pg.consume_input()
        result = pg.get_result()
        if result is None:
            return
        if result.status == pq.ExecStatus.COPY_OUT:
            while pg.get_copy_data(0)[0] > 0:
                pass
        elif result.status == pq.ExecStatus.COPY_IN:
            pg.put_copy_end(b"cancelled")
            pg.flush()


def _past_limit() -> str:
    return f"did not finish within {statement_timeout_words()}; it was cancelled"


def timed_out(sqlstate: str) -> bool:
    """Is this error of the user's SQL the server's statement_timeout? (57014: a statement
    cancelled; Lease Lab cancels the user's statements only at the time limit.)"""
    return sqlstate == "57014"


def past_limit(what: str) -> StatementLimitError:
    """The error for a statement the server cancelled at the statement time limit."""
    return StatementLimitError(f"{what}: {_past_limit()}")


def run_as_sandbox(
    dsn: str | None,
    statement: str,
    params: Params | None = None,
    *,
    setup: str = "",
    max_rows: int | None = 1000,
    reads: str | None = None,
    timeout_ms: int | None = None,
) -> tuple[list[str], Rows]:
    """Run ONE statement as a fresh sandbox role (see the module docstring), in a transaction that
    is rolled back whatever happened; (column names, at most `max_rows` rows, all when None). The
    statement runs on a schema of the role's own that `setup` (DDL and rows, run as the role
    first) fills, or, with `reads`, READ ONLY on that existing schema's tables. `timeout_ms`: its
    statement_timeout. Role and schema are dropped on return (its sessions ended, its advisory
    locks with them), so nothing the statement did stays, and it could touch nothing outside
    them. For SQL a reader typed (the notebooks' exercises)."""
    with (
        sandbox(dsn, reads=reads) as box,
        box.connect(application_name="leaselab:statement") as conn,
    ):
        try:
            return _one_statement(conn, statement, params, setup, max_rows, reads, timeout_ms)
        finally:  # a statement that broke the session (COPY) has its locks ended with the role
            with contextlib.suppress(psycopg.Error):
                conn.execute("SELECT pg_advisory_unlock_all()")


def _one_statement(
    conn: psycopg.Connection,
    statement: str,
    params: Params | None,
    setup: str,
    max_rows: int | None,
    reads: str | None,
    timeout_ms: int | None,
) -> tuple[list[str], Rows]:
    """The statement in a transaction rolled back whatever happened (an error of the rollback
    itself, on a session the statement broke, never hides the statement's)."""
    conn.execute("BEGIN READ ONLY" if reads is not None else "BEGIN")
    try:
        if timeout_ms is not None:
            conn.execute("SELECT set_config('statement_timeout', %s, true)", (str(timeout_ms),))
        if reads is not None:
            conn.execute(sql.SQL("SET LOCAL search_path TO {}").format(sql.Identifier(reads)))
        for part in split_statements(setup) if setup else []:
            conn.execute(part.text)
        cur = conn.execute(statement, params, prepare=True)
        if cur.description is None:
            return [], []
        rows = cur.fetchall() if max_rows is None else cur.fetchmany(max_rows)
        return [d.name for d in cur.description], rows
    finally:
        with contextlib.suppress(psycopg.Error):
            conn.execute("ROLLBACK")
