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

    from sim.db.sandbox import sandbox
    with sandbox(dsn) as box:             # the role and its schema; both dropped on exit
        with box.connect() as conn:       # logged in as the role, search_path = its schema
            conn.execute("EXPLAIN ...")   # e.g. probing a user's statement under its rights
"""

from __future__ import annotations

import contextlib
import secrets
import select
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import psycopg
from psycopg import pq, sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from sim.db import leftovers
from sim.db.server import connect_dsn, connection_error, describe_dsn, open_connection, unavailable
from sim.errors import ConfigError
from sim.limits import statement_timeout, statement_timeout_words

OWN_RIGHTS_FLAG = "--own-rights"
GONE_S = 10.0  # the role's server processes must have exited this long after being terminated

# Where the run's role could write outside its schema through privileges granted to PUBLIC.
_EXPOSED = """
SELECT 'CREATE on database ' || current_database()
 WHERE has_database_privilege(%(role)s, current_database(), 'CREATE')
UNION ALL
(SELECT 'CREATE on schema ' || nspname FROM pg_namespace
  WHERE nspname <> %(schema)s AND has_schema_privilege(%(role)s, oid, 'CREATE') ORDER BY 1 LIMIT 1)
UNION ALL
(SELECT 'write access to table ' || n.nspname || '.' || c.relname
   FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
  WHERE n.nspname <> %(schema)s AND c.relkind IN ('r', 'p', 'v', 'f')
    AND n.nspname NOT IN ('pg_catalog', 'information_schema')
    AND has_table_privilege(%(role)s, c.oid, 'INSERT, UPDATE, DELETE, TRUNCATE')
  ORDER BY 1 LIMIT 1)
"""
_BACKENDS = "SELECT pid FROM pg_stat_activity WHERE usename = %s AND pid <> pg_backend_pid()"


class SandboxRefused(ConfigError):
    """The server cannot give a queue's SQL a sandbox (and the caller did not accept its
    own rights)."""


class StatementLimitError(ConfigError):
    """A statement of the user's SQL ran past the statement time limit (it was cancelled)."""


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

    def connect(self, application_name: str = "leaselab:sandbox", **kwargs) -> psycopg.Connection:
        """A connection as the role (or the DSN user), search_path set to the run's schema, every
        statement bounded by the statement time limit."""
        conn = open_connection(
            self.dsn, autocommit=True, application_name=application_name, **kwargs
        )
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

    def drop(self, admin: psycopg.Connection, *, keep_schema: bool = False) -> None:
        """End every session of the role, drop the schema (or hand it to the DSN user, kept) and
        the role. Safe to call twice."""
        with _admin_errors(self.admin_dsn):
            if self.role is not None:
                terminate(admin, self.role)
            if keep_schema:
                if self.role is not None:
                    admin.execute(
                        sql.SQL("REASSIGN OWNED BY {} TO CURRENT_USER").format(
                            sql.Identifier(self.role)
                        )
                    )
                leftovers.mark_kept(admin, self.schema)
            else:
                admin.execute(
                    sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(self.schema))
                )
            if self.role is not None:
                role = sql.Identifier(self.role)
                [(exists,)] = admin.execute(
                    "SELECT count(*) FROM pg_roles WHERE rolname = %s", (self.role,)
                ).fetchall()
                if exists:
                    admin.execute(sql.SQL("DROP OWNED BY {}").format(role))
                    admin.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(role))


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
                if keep:  # a run that dies keeps it too; only its role goes
                    leftovers.mark_kept(admin, name)
                else:
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
def sandbox(dsn: str | None = None, *, own_rights: bool = False) -> Iterator[Sandbox]:
    """A sandbox for the user's SQL on the server at `dsn` (the embedded one when None), dropped
    (role and schema) on exit."""
    dsn = connect_dsn(dsn)
    admin = open_connection(dsn, autocommit=True, application_name="leaselab:admin")
    try:
        box = create(admin, dsn, own_rights=own_rights)
        try:
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
    for name, value in {**timeouts, **settings, "search_path": box.schema}.items():
        admin.execute(
            sql.SQL("ALTER ROLE {} SET {} = {}").format(
                role, sql.Identifier(name), sql.Literal(value)
            )
        )
    [(superuser,)] = admin.execute(
        "SELECT rolsuper FROM pg_roles WHERE rolname = current_user"
    ).fetchall()
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
            "so a queue's SQL could write outside the run's schema; revoke it from PUBLIC, or pass "
            f"{OWN_RIGHTS_FLAG} to run your SQL with your own rights"
        )


@contextlib.contextmanager
def _admin_errors(dsn: str) -> Iterator[None]:
    try:
        yield
    except psycopg.OperationalError as exc:
        raise connection_error(dsn, exc) from None


# ---- a statement with a time limit, on the wire --------------------------------------------------


def bounded(
    pg: pq.abc.PGconn, send: Callable[[], None], limit: float, what: str
) -> list[pq.abc.PGresult]:
    """Send a statement (`send` calls pg.send_*) and collect its results, waiting at most `limit`
    seconds (plus a second's grace for the server's own statement_timeout to speak first). Past
    it, the statement is cancelled and StatementLimitError names `what` and the limit: the user's
    SQL may have turned the server's timeout off (set_config), this one it cannot."""
    send()
    pg.flush()
    deadline = time.monotonic() + limit + 1.0
    while True:
        pg.consume_input()
        if not pg.is_busy():
            break
        left = deadline - time.monotonic()
        if left <= 0:
            pg.get_cancel().cancel()
            _drain(pg)
            raise StatementLimitError(f"{what}: {_past_limit()}")
        select.select([pg.socket], [], [], min(left, 0.5))
    results = []
    while (result := pg.get_result()) is not None:
        results.append(result)
    return results


def _drain(pg: pq.abc.PGconn) -> None:
    deadline = time.monotonic() + GONE_S
    while pg.is_busy() and time.monotonic() < deadline:
        select.select([pg.socket], [], [], 0.1)
        pg.consume_input()
    while pg.get_result() is not None:
        pass


def _past_limit() -> str:
    return f"did not finish within {statement_timeout_words()}; it was cancelled"


def timed_out(sqlstate: str) -> bool:
    """Is this error of the user's SQL the server's statement_timeout? (57014: a statement
    cancelled; Lease Lab cancels the user's statements only at the time limit.)"""
    return sqlstate == "57014"


def past_limit(what: str) -> StatementLimitError:
    """The error for a statement the server cancelled at the statement time limit."""
    return StatementLimitError(f"{what}: {_past_limit()}")
