"""A queue's own SQL is sandboxed by PostgreSQL's privileges (sim.db.queue.sandbox): every attack of
issue 27 item 1 exits 2 with one line, and a fingerprint of the server (schemas, relations,
functions, types, roles, settings, the rows of a sentinel table) is unchanged afterwards.
Transaction control and settings in the user's files are refused before anything runs, and every
statement of the user's SQL has a time limit, after which no server process of it remains."""

from __future__ import annotations

import os
import re
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from sim.cli.main import main
from sim.db.queries import job_schema_sql
from sim.db.queue.directory import QueueDefinitionError, load_queue
from sim.db.queue.sandbox import SandboxRefused, sandbox
from sim.scenario.limits import STATEMENT_TIMEOUT_ENV
from tests.cli.test_hardening import one_error_line
from tests.db.postgres.fingerprint import create_role, fingerprint, hostile_database

# server_wide: the tests compare every schema, role, setting and session on the server
pytestmark = [pytest.mark.postgres, pytest.mark.server_wide]

HEARTBEAT = (
    "-- name: heartbeat\n-- renew\n-- params: id int, owner text, attempt int, lease_until time\n"
    "UPDATE payment_jobs SET lease_until = %(lease_until)s WHERE id = %(id)s "
    "AND lease_owner = %(owner)s AND attempts = %(attempt)s RETURNING id, lease_until\n"
)
CLAIM_HEAD = (
    "-- name: claim_conditional\n-- claim\n"
    "-- params: id int, owner text, now time, lease_until time, max_attempts int\n"
)
CLAIM_SET = (
    "UPDATE payment_jobs SET status = 'Processing', lease_owner = %(owner)s, "
    "lease_until = %(lease_until)s, attempts = attempts + 1 WHERE id = %(id)s "
    "AND attempts < %(max_attempts)s AND (status = 'Pending' OR lease_until < %(now)s) "
    "RETURNING id, attempts"
)
SELECT_HEAD = (
    "-- name: select_candidates\n-- read\n"
    "-- params: now time, take_expired bool, max_attempts int, limit int\n"
)
SELECT_BODY = (
    "SELECT id FROM payment_jobs WHERE status = 'Pending' AND attempts < %(max_attempts)s "
    "AND (%(take_expired)s OR %(now)s IS NOT NULL) ORDER BY id LIMIT %(limit)s"
)
REFUSED = "PostgreSQL refuses it to the run's role"  # the server's own words differ by version
PWNED = Path("/tmp/leaselab-sandbox-pwned")
TRIGGER = """
CREATE FUNCTION evil() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN INSERT INTO public.leaselab_sentinel VALUES (99); RETURN NEW; END $$;
CREATE TRIGGER evil AFTER INSERT ON payment_jobs FOR EACH ROW EXECUTE FUNCTION evil();
"""
# (what, queries.sql, the lines added to schema.sql or None, what the one error line says)
ATTACKS = [
    ("drop", HEARTBEAT, "DROP TABLE IF EXISTS public.leaselab_sentinel;", "must be owner"),
    (
        "delete",
        "-- name: insert_job\n-- enqueue\n-- params: id int\n"
        "DELETE FROM public.leaselab_sentinel WHERE x = %(id)s\n",
        None,
        "permission denied for table leaselab_sentinel",
    ),
    (
        "replace function",
        HEARTBEAT,
        "CREATE OR REPLACE FUNCTION public.leaselab_sentinel_f() RETURNS int LANGUAGE sql "
        "AS 'SELECT 2';",
        "permission denied for schema public",
    ),
    ("trigger", HEARTBEAT, TRIGGER, "permission denied for table leaselab_sentinel"),
    (
        "data-modifying CTE",
        CLAIM_HEAD + "WITH gone AS (DELETE FROM public.leaselab_sentinel RETURNING 1) " + CLAIM_SET,
        None,
        "permission denied for table leaselab_sentinel",
    ),
    (
        "create function",
        HEARTBEAT,
        "CREATE FUNCTION public.evil_f() RETURNS int LANGUAGE sql AS 'SELECT 1';",
        "permission denied for schema public",
    ),
    ("create type", HEARTBEAT, "CREATE TYPE public.evil_t AS (x int);", REFUSED),
    ("create schema", HEARTBEAT, "CREATE SCHEMA leaselab_other;", "CREATE SCHEMA is not part"),
    (
        "savepoint",
        HEARTBEAT,
        "SAVEPOINT a;\nCREATE TABLE public.hidden (x int);\nRELEASE a;",
        "SAVEPOINT is transaction control",
    ),
    (
        "do exception",
        HEARTBEAT,
        "DO $$ BEGIN CREATE TABLE public.hidden (x int); EXCEPTION WHEN others THEN NULL; END $$;",
        "DO runs code",
    ),
    (
        "function exception",
        HEARTBEAT,
        "CREATE FUNCTION hide() RETURNS void LANGUAGE plpgsql AS $$ BEGIN "
        "CREATE TABLE public.hidden (x int); EXCEPTION WHEN others THEN NULL; END $$;\n"
        "SELECT hide();\nCREATE TABLE public.hidden2 (x int);",
        "permission denied for schema public",
    ),
    ("alter database", HEARTBEAT, "ALTER DATABASE postgres SET work_mem = '1MB';", "schema.sql"),
    ("alter role", HEARTBEAT, "ALTER ROLE postgres SET work_mem = '1MB';", "ALTER ROLE is not"),
    ("alter own role", HEARTBEAT, "ALTER ROLE CURRENT_USER SET work_mem = '1MB';", "ALTER ROLE"),
    ("create role", HEARTBEAT, "CREATE ROLE leaselab_evil SUPERUSER;", "CREATE ROLE is not"),
    (
        "copy to program",
        HEARTBEAT,
        f"COPY (SELECT 1) TO PROGRAM 'touch {PWNED}';",
        "COPY moves data to or from the client or the server's files",
    ),
    (
        "copy to program, in queries.sql",
        "-- name: insert_job\n-- enqueue\n-- params: id int\n"
        f"COPY (SELECT %(id)s::int) TO PROGRAM 'touch {PWNED}'\n",
        None,
        "is not a query",
    ),
    (
        "set role back",
        HEARTBEAT,
        "SELECT set_config('role', 'postgres', false);\nDROP TABLE public.leaselab_sentinel;",
        "permission denied to set role",
    ),
    (
        "reset role",
        HEARTBEAT,
        "RESET ROLE;\nDROP TABLE public.leaselab_sentinel;",
        "RESET changes the session's settings",
    ),
    (
        "session authorization",
        HEARTBEAT,
        "SET SESSION AUTHORIZATION postgres;\nDROP TABLE public.leaselab_sentinel;",
        "schema.sql:",
    ),
    ("commit", HEARTBEAT, "COMMIT;", "COMMIT is transaction control"),
    ("rollback", HEARTBEAT, "ROLLBACK;", "ROLLBACK is transaction control"),
    (
        "read only",
        HEARTBEAT,
        "SET default_transaction_read_only = on;",
        "SET changes the session's settings",
    ),
    (
        "commit, in queries.sql",
        "-- name: insert_job\n-- enqueue\n-- params: id int\nCOMMIT -- %(id)s\n",
        None,
        "is not a query",
    ),
]


@pytest.fixture(scope="module")
def hostile(pg_dsn):
    """A database of its own for the attacks (tests.db.postgres.fingerprint), with a sentinel
    table and function in its public schema."""
    for server in hostile_database(pg_dsn):
        server.admin.execute("CREATE TABLE public.leaselab_sentinel (x int)")
        server.admin.execute("INSERT INTO public.leaselab_sentinel VALUES (1), (2), (3)")
        server.admin.execute(
            "CREATE FUNCTION public.leaselab_sentinel_f() RETURNS int LANGUAGE sql AS 'SELECT 1'"
        )
        yield server


@pytest.fixture
def server(hostile):
    """The attacks' server: its fingerprint (schemas, relations, functions, roles, settings, the
    sentinel's rows...) is the same after the test, and no program ran."""
    PWNED.unlink(missing_ok=True)
    before = fingerprint(hostile.admin)
    yield hostile
    assert fingerprint(hostile.admin) == before
    assert not PWNED.exists()


def queue(tmp_path: Path, queries: str, schema_lines: str | None) -> Path:
    folder = tmp_path / "queue"
    folder.mkdir()
    (folder / "queries.sql").write_text(queries, encoding="utf-8")
    if schema_lines is not None:
        (folder / "schema.sql").write_text(
            job_schema_sql() + "\n" + schema_lines + "\n", encoding="utf-8"
        )
    return folder


def cli_run(folder: Path, dsn: str, *extra: str) -> int:
    return main(
        [
            "run",
            "baseline",
            "--sql",
            str(folder),
            "--dsn",
            dsn,
            "--set",
            "workload.jobs=4",
            "--set",
            "horizon=20",
            *extra,
        ]
    )


@pytest.mark.parametrize(
    ("what", "queries", "schema", "says"), ATTACKS, ids=[a[0] for a in ATTACKS]
)
def test_every_attack_exits_2_in_one_line_and_changes_nothing(
    server, tmp_path, capsys, what, queries, schema, says
):
    assert cli_run(queue(tmp_path, queries, schema), server.superuser) == 2
    line = one_error_line(capsys)
    assert says in line, line


def test_the_role_is_unprivileged_owns_only_its_schema_and_is_dropped(pg_dsn, admin):
    with sandbox(pg_dsn) as box:
        role = admin.execute(
            "SELECT rolsuper, rolcreaterole, rolcreatedb, rolreplication, rolbypassrls, "
            "rolinherit FROM pg_roles WHERE rolname = %s",
            (box.role,),
        ).fetchone()
        assert role == (False, False, False, False, False, False)
        assert admin.execute(
            "SELECT count(*) FROM pg_auth_members WHERE member = %s::regrole", (box.role,)
        ).fetchone() == (0,)
        owned = admin.execute(
            "SELECT nspname FROM pg_namespace WHERE nspowner = %s::regrole", (box.role,)
        ).fetchall()
        assert owned == [(box.schema,)]
        assert admin.execute(
            "SELECT has_schema_privilege(%s, 'public', 'CREATE'), "
            "has_database_privilege(%s, current_database(), 'CREATE')",
            (box.role, box.role),
        ).fetchone() == (False, False)
        with box.connect() as conn:
            assert conn.execute("SELECT current_user, session_user").fetchone() == (
                box.role,
                box.role,
            )
            assert conn.execute("SHOW statement_timeout").fetchone()[0] == "30s"
            conn.execute("CREATE TABLE mine (x int)")  # in the run's schema: allowed
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute("SET ROLE postgres")
    gone = admin.execute(
        "SELECT (SELECT count(*) FROM pg_roles WHERE rolname = %s), "
        "(SELECT count(*) FROM pg_namespace WHERE nspname = %s)",
        (box.role, box.schema),
    ).fetchone()
    assert gone == (0, 0)


def test_a_run_drops_its_role_and_a_kept_schema_stays_with_its_shut_role(pg_dsn, admin, capsys):
    """Issue 35 item 1: a kept schema stays its role's (never the DSN user's), the role may no
    longer log in, its grants to PUBLIC are revoked, and the hint says SET ROLE."""
    folder = Path(__file__).resolve().parents[3] / "examples" / "queues" / "seed"
    assert cli_run(folder, pg_dsn) == 0
    assert cli_run(folder, pg_dsn, "--keep-schema") == 0
    out = capsys.readouterr().out
    kept = out.split("kept schema ")[1].split()[0]
    try:
        assert f"SET ROLE {kept}" in out
        owner = admin.execute(
            "SELECT nspowner::regrole::text FROM pg_namespace WHERE nspname = %s", (kept,)
        ).fetchone()
        assert owner == (kept,)
        role = admin.execute(
            "SELECT rolcanlogin, rolpassword IS NULL, rolsuper FROM pg_authid WHERE rolname = %s",
            (kept,),
        ).fetchone()
        assert role == (False, True, False)
        assert admin.execute(
            "SELECT has_schema_privilege('public', %s, 'USAGE')", (kept,)
        ).fetchone() == (False,)
    finally:
        admin.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(kept)))
        admin.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(kept)))


def test_a_user_who_cannot_create_roles_is_refused_unless_own_rights(pg_dsn, admin, tmp_path):
    role = "leaselab_test_nocreaterole"
    admin.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(role)))
    create_role(admin, role, "LOGIN PASSWORD 'pw-secret'")  # marked: fingerprints leave it out
    admin.execute(
        sql.SQL("GRANT CREATE ON DATABASE {} TO {}").format(
            sql.Identifier(admin.info.dbname), sql.Identifier(role)
        )
    )
    dsn = psycopg.conninfo.make_conninfo(pg_dsn, user=role, password="pw-secret")
    folder = Path(__file__).resolve().parents[3] / "examples" / "queues" / "seed"
    try:
        with pytest.raises(SandboxRefused) as info:
            load_queue(folder).check_on(dsn)
        assert str(info.value).startswith(
            f"--sql: user {role} at host "
        ) and "cannot create roles (it has neither CREATEROLE nor SUPERUSER)" in str(info.value)
        assert "--own-rights" in str(info.value) and "pw-secret" not in str(info.value)
        load_queue(folder, own_rights=True).check_on(dsn)  # accepted: the user's own rights
    finally:
        admin.execute(
            sql.SQL("REVOKE CREATE ON DATABASE {} FROM {}").format(
                sql.Identifier(admin.info.dbname), sql.Identifier(role)
            )
        )
        admin.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))


def test_cli_own_rights_flag(pg_dsn, tmp_path, capsys):
    folder = Path(__file__).resolve().parents[3] / "examples" / "queues" / "seed"
    assert cli_run(folder, pg_dsn, "--own-rights") == 0


# ---- time limits -------------------------------------------------------------------------------


@pytest.fixture
def one_second(monkeypatch):
    monkeypatch.setenv(STATEMENT_TIMEOUT_ENV, "1")


def backends_of_sandboxes(admin) -> list:
    return admin.execute(
        "SELECT pid, usename, query FROM pg_stat_activity WHERE usename LIKE 'leaselab%' "
        "AND datname = current_database()"
    ).fetchall()


SLOW = {
    "sleep": SELECT_HEAD + SELECT_BODY.replace("WHERE", "WHERE pg_sleep(1000000) IS NOT NULL AND"),
    "recursive CTE": SELECT_HEAD
    + "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) "
    + SELECT_BODY.replace("WHERE", "WHERE id NOT IN (SELECT n FROM r) AND"),
}


@pytest.mark.timeout(120)
@pytest.mark.parametrize("kind", sorted(SLOW))
def test_a_statement_past_the_time_limit_is_one_error_and_leaves_no_backend(
    one_second, server, tmp_path, capsys, kind
):
    folder = queue(tmp_path, SLOW[kind] + "\n" + CLAIM_HEAD + CLAIM_SET + "\n", None)
    assert cli_run(folder, server.superuser, "--set", "policy.claim=conditional_update") == 2
    line = one_error_line(capsys)
    assert "queries.sql:" in line and ": select_candidates: did not finish within the " in line
    assert "statement time limit of 1 s (set LEASELAB_STATEMENT_TIMEOUT)" in line
    assert backends_of_sandboxes(server.admin) == []


@pytest.mark.timeout(120)
def test_a_statement_that_turns_its_timeout_off_is_still_cut(one_second, server, tmp_path, capsys):
    off = "FROM payment_jobs, set_config('statement_timeout', '0', false) AS off"
    body = SELECT_BODY.replace("FROM payment_jobs", off)
    sleeper = HEARTBEAT.replace("RETURNING", "AND pg_sleep(1000000) IS NOT NULL RETURNING")
    folder = queue(tmp_path, SELECT_HEAD + body + "\n" + sleeper, None)
    code = cli_run(folder, server.superuser, "--set", "policy.heartbeat_interval=1")
    assert code == 2
    line = one_error_line(capsys)
    assert ": heartbeat: did not finish within the statement time limit of 1 s" in line
    assert backends_of_sandboxes(server.admin) == []


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    "lines",
    [
        "SELECT pg_sleep(1000000);",
        "SELECT set_config('statement_timeout', '0', false);\nSELECT pg_sleep(1000000);",
    ],
)
def test_the_check_has_the_time_limit_too(one_second, server, tmp_path, lines):
    folder = queue(tmp_path, HEARTBEAT, lines)
    with pytest.raises(QueueDefinitionError) as info:
        load_queue(folder).check_on(server.superuser)
    line = str(info.value)
    assert line.startswith(f"{folder / 'schema.sql'}:")
    assert "did not finish within the statement time limit of 1 s" in line
    assert backends_of_sandboxes(server.admin) == []


def test_transaction_control_in_a_file_is_refused_before_anything_runs(server, tmp_path):
    folder = queue(
        tmp_path, HEARTBEAT, "CREATE TABLE extra (x int);\nCOMMIT;\nCREATE TABLE z (x int);"
    )
    schemas = server.admin.execute("SELECT count(*) FROM pg_namespace").fetchone()
    with pytest.raises(QueueDefinitionError) as info:
        load_queue(folder).check_on(server.superuser)
    n = job_schema_sql().count("\n") + 3
    assert str(info.value).startswith(f"{folder / 'schema.sql'}:{n}: COMMIT is transaction control")
    assert server.admin.execute("SELECT count(*) FROM pg_namespace").fetchone() == schemas


def test_probes_run_under_the_sandbox(pg_dsn):
    """A reusable piece for other checks: EXPLAIN of a user's statement under the run's role."""
    with sandbox(pg_dsn) as box, box.connect() as conn:
        conn.execute(job_schema_sql())
        plan = conn.execute("EXPLAIN SELECT * FROM payment_jobs").fetchall()
        assert plan and "payment_jobs" in plan[0][0]
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("EXPLAIN SELECT * FROM pg_authid")


def test_a_createrole_user_who_is_no_superuser_gets_the_sandbox(pg_dsn, admin):
    """CREATEROLE is enough (PostgreSQL 16+ gives its holder less over the roles it creates)."""
    import sim

    role = "leaselab_test_createrole"
    ident = sql.Identifier(role)
    admin.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(ident))
    create_role(admin, role, "LOGIN CREATEROLE PASSWORD 'pw-secret'")
    database = sql.Identifier(admin.info.dbname)
    admin.execute(sql.SQL("GRANT CREATE ON DATABASE {} TO {}").format(database, ident))
    dsn = psycopg.conninfo.make_conninfo(pg_dsn, user=role, password="pw-secret")
    folder = Path(__file__).resolve().parents[3] / "examples" / "queues" / "seed"
    try:
        r = sim.run("gc-pause-zombie", sql=folder, dsn=dsn)
        assert r.summary["jobs"] == 3 and r.queue == str(folder)
        from sim.db import leftovers

        mine = [
            n
            for _, n, m in leftovers.marks(admin)
            if (m or {}).get("pid") == os.getpid() and re.fullmatch("leaselab_[0-9a-f]{12}", n)
        ]
        assert mine == []
    finally:
        admin.execute(sql.SQL("REVOKE CREATE ON DATABASE {} FROM {}").format(database, ident))
        admin.execute(sql.SQL("DROP ROLE {}").format(ident))


def test_a_role_that_reads_a_schema_gets_usage_and_select_only_and_keeps_nothing(pg_dsn, admin):
    """run_as_sandbox(reads=...) (the teaching checker's run_sandboxed): the role may use that one
    schema and SELECT its tables, nothing more, and every grant goes with the role, also when the
    statement fails."""
    from sim.db.queue.sandbox import run_as_sandbox

    suffix = os.urandom(4).hex()
    reads, other = f"reads_{suffix}", f"other_{suffix}"
    rights = (
        "SELECT has_schema_privilege(%(s)s, 'USAGE'), has_schema_privilege(%(s)s, 'CREATE'), "
        "has_table_privilege(%(t)s, 'SELECT'), "
        "has_table_privilege(%(t)s, 'INSERT, UPDATE, DELETE, TRUNCATE, REFERENCES, TRIGGER'), "
        "has_sequence_privilege(%(q)s, 'USAGE, SELECT, UPDATE'), "
        "has_schema_privilege(%(o)s, 'USAGE'), count(*) FROM jobs"
    )
    acls = (
        "SELECT count(*) FROM pg_namespace n, aclexplode(n.nspacl) a WHERE n.nspname = %s "
        "AND a.grantee <> n.nspowner UNION ALL SELECT count(*) FROM pg_class c, "
        "aclexplode(c.relacl) a WHERE c.relnamespace = %s::regnamespace AND a.grantee <> c.relowner"
    )
    try:
        for name in (reads, other):
            admin.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(name)))
        jobs = sql.Identifier(reads, "jobs")
        admin.execute(sql.SQL("CREATE TABLE {} (id serial PRIMARY KEY)").format(jobs))
        admin.execute(sql.SQL("INSERT INTO {} DEFAULT VALUES").format(jobs))
        params = {"s": reads, "t": f"{reads}.jobs", "q": f"{reads}.jobs_id_seq", "o": other}
        _, rows = run_as_sandbox(pg_dsn, rights, params, reads=reads)
        assert rows == [(True, False, True, False, False, False, 1)]
        with pytest.raises(psycopg.errors.ReadOnlySqlTransaction):
            run_as_sandbox(pg_dsn, "INSERT INTO jobs DEFAULT VALUES", reads=reads)
        with pytest.raises(psycopg.errors.DivisionByZero):
            run_as_sandbox(pg_dsn, "SELECT 1 / 0 FROM jobs", reads=reads)
        assert admin.execute(acls, (reads, reads)).fetchall() == [(0,), (0,)]
        assert admin.execute(sql.SQL("SELECT count(*) FROM {}").format(jobs)).fetchone() == (1,)
    finally:
        for name in (reads, other):
            admin.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))
