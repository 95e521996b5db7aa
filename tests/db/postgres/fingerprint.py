"""A fingerprint of a PostgreSQL server for hostile-queue tests (issue 35): what a queue's SQL must
leave exactly as it found it, robust to other tests creating and dropping their own objects on
the same server at the same time (pytest-xdist; one shared server in CI's PostgreSQL 15 pass).

The hostile cases run in a database made for them (`hostile_database`), so everything local to a
database (schemas with owners and ACLs, relations, functions, extensions, event triggers, default
privileges, large objects, the sentinel's rows) is fingerprinted whole. What the cluster shares
(roles, memberships, role and database settings, databases, prepared transactions, ALTER SYSTEM)
is fingerprinted whole too, except the objects marked (sim.db.leftovers) by another process: other
tests' runs and test roles, which come and go on their own.
"""

from __future__ import annotations

import json
import os
import secrets
from dataclasses import dataclass

import psycopg
from psycopg import sql
from psycopg.conninfo import make_conninfo

from sim.db import leftovers

_LOCAL = {
    "schemas": "SELECT n.nspname, pg_get_userbyid(n.nspowner), n.nspacl::text, "
    "obj_description(n.oid, 'pg_namespace') FROM pg_namespace n "
    "WHERE n.nspname !~ '^pg_(toast_)?temp_'",
    "relations": "SELECT n.nspname, c.relname, c.relkind, pg_get_userbyid(c.relowner), "
    "c.relacl::text FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
    "WHERE n.nspname !~ '^pg_(toast_)?temp_'",
    "functions": "SELECT p.oid::regprocedure::text, md5(p.prosrc), pg_get_userbyid(p.proowner), "
    "p.prosecdef, p.proacl::text FROM pg_proc p",
    "types": "SELECT t.oid::regtype::text, pg_get_userbyid(t.typowner) FROM pg_type t",
    "triggers": "SELECT tgrelid::regclass::text, tgname FROM pg_trigger",
    "event triggers": "SELECT evtname FROM pg_event_trigger",
    "extensions": "SELECT extname FROM pg_extension",
    "default privileges": "SELECT defaclrole, defaclacl::text FROM pg_default_acl",
    "large objects": "SELECT oid::bigint FROM pg_largeobject_metadata",
    "sentinel": "SELECT x FROM public.sentinel",
}
# Cluster-wide rows, each with the roles or database it concerns (to leave other tests' out).
_SHARED = {
    "roles": "SELECT rolname, rolsuper, rolcreaterole, rolcreatedb, rolcanlogin, rolreplication, "
    "rolbypassrls, rolinherit, rolname FROM pg_roles",
    "memberships": "SELECT r.rolname, m.rolname, a.admin_option, r.rolname, m.rolname "
    "FROM pg_auth_members a JOIN pg_roles r ON r.oid = a.roleid "
    "JOIN pg_roles m ON m.oid = a.member",
    "settings": "SELECT coalesce(d.datname, ''), coalesce(r.rolname, ''), s.setconfig::text, "
    "coalesce(r.rolname, ''), coalesce(d.datname, '') FROM pg_db_role_setting s "
    "LEFT JOIN pg_roles r ON r.oid = s.setrole LEFT JOIN pg_database d ON d.oid = s.setdatabase",
    "databases": "SELECT datname, pg_get_userbyid(datdba), datname, pg_get_userbyid(datdba) "
    "FROM pg_database",
    "prepared transactions": "SELECT gid, owner, database, owner, database FROM pg_prepared_xacts",
    "file settings": "SELECT name, setting, '', '' FROM pg_file_settings",
}


def others(conn: psycopg.Connection) -> set[str]:
    """Roles and databases marked by another process: other tests' and runs'."""
    mine = os.getpid()
    rows = conn.execute(
        "SELECT rolname, shobj_description(oid, 'pg_authid') FROM pg_roles UNION ALL "
        "SELECT datname, shobj_description(oid, 'pg_database') FROM pg_database"
    ).fetchall()
    found = set()
    for name, text in rows:
        try:
            mark = json.loads(text or "")
        except ValueError:
            continue
        if isinstance(mark, dict) and mark.get("pid") not in (None, mine):
            found.add(name)
    return found


def fingerprint(conn: psycopg.Connection) -> dict:
    """What a hostile queue must leave as it was (see the module docstring); `conn` is a
    superuser's, on the hostile cases' own database."""
    with conn.transaction():  # one snapshot: a role made meanwhile is in it with its mark
        conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        skip = others(conn)
        out = {key: sorted(map(repr, conn.execute(q).fetchall())) for key, q in _LOCAL.items()}
        for key, query in _SHARED.items():
            rows = conn.execute(query).fetchall()
            width = {"roles": 8, "file settings": 2, "databases": 2}.get(key, 3)
            out[key] = sorted(
                repr(row[:width]) for row in rows if not (set(map(str, row[width:])) & skip)
            )
    return out


def create_role(conn: psycopg.Connection, name: str, options: str = "LOGIN") -> None:
    """CREATE ROLE `name` with `options` (SQL words of the test's own) and its mark, in one
    transaction: another process's fingerprint never sees it unmarked."""
    with conn.transaction():
        conn.execute(sql.SQL("CREATE ROLE {} {}").format(sql.Identifier(name), sql.SQL(options)))
        mark(conn, "ROLE", name)


def mark(conn: psycopg.Connection, kind: str, name: str) -> None:
    """Name this process as the owner of a test ROLE or DATABASE (fingerprints of other
    processes leave it out)."""
    conn.execute(
        sql.SQL("COMMENT ON {} {} IS {}").format(
            sql.SQL(kind), sql.Identifier(name), sql.Literal(json.dumps(leftovers.owner()))
        )
    )


@dataclass
class HostileServer:
    """A database of its own on the test server, its DSNs and a superuser connection to it."""

    database: str
    superuser: str  # DSN of the test server's own (super)user, on this database
    createrole: str  # a login with CREATEROLE only (and CREATE on the database)
    owner: str  # a plain login that owns the database: no CREATEROLE
    admin: psycopg.Connection
    roles: tuple[str, ...]

    def dsn(self, kind: str) -> str:
        return {"superuser": self.superuser, "createrole": self.createrole, "owner": self.owner}[
            kind
        ]


def hostile_database(pg_dsn: str):
    """Generator for a fixture: a HostileServer, dropped (database and roles) afterwards."""
    tag = secrets.token_hex(4)
    database, createrole, owner = (
        f"leaselab_fp_{tag}",
        f"leaselab_t{tag}_cr",
        f"leaselab_t{tag}_own",
    )
    with psycopg.connect(pg_dsn, autocommit=True) as root:
        for role, extra in ((createrole, "CREATEROLE"), (owner, "")):
            create_role(root, role, f"LOGIN PASSWORD 'pw-hostile' {extra}")
        root.execute(
            sql.SQL("CREATE DATABASE {} OWNER {}").format(
                sql.Identifier(database), sql.Identifier(owner)
            )
        )
        mark(root, "DATABASE", database)
        root.execute(
            sql.SQL("GRANT CREATE ON DATABASE {} TO {}").format(
                sql.Identifier(database), sql.Identifier(createrole)
            )
        )
    superuser = make_conninfo(pg_dsn, dbname=database)
    admin = psycopg.connect(superuser, autocommit=True)
    admin.execute("CREATE TABLE public.sentinel (x int)")
    admin.execute("INSERT INTO public.sentinel VALUES (1), (2), (3)")
    server = HostileServer(
        database,
        superuser,
        make_conninfo(pg_dsn, dbname=database, user=createrole, password="pw-hostile"),
        make_conninfo(pg_dsn, dbname=database, user=owner, password="pw-hostile"),
        admin,
        (createrole, owner),
    )
    try:
        yield server
    finally:
        admin.close()
        with psycopg.connect(pg_dsn, autocommit=True) as root:
            root.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s",
                (database,),
            )
            root.execute(sql.SQL("DROP DATABASE IF EXISTS {}").format(sql.Identifier(database)))
            for role in server.roles:
                root.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(role)))
