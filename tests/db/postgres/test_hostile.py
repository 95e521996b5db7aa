"""Issue 35: a queue's SQL never gets more than its sandbox role, during the run, after it and
after Lease Lab dies. Each hostile queue runs against a database of its own (fingerprint.py), as
the server's superuser, as a CREATEROLE-only login and as a plain owner of the database; the
command exits as it should with one line, the fingerprint of the server (schemas with owners and
ACLs, functions, roles and memberships, settings, prepared transactions, the sentinel's rows) is
unchanged afterwards, and no program ran on the host."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from sim.cli.main import main
from sim.db.queries import job_schema_sql
from tests.cli.test_hardening import one_error_line
from tests.db.postgres.fingerprint import fingerprint, hostile_database

pytestmark = pytest.mark.postgres

PWNED = Path("/tmp/leaselab-hostile-pwned")
JOBS = ["--set", "workload.jobs=4", "--set", "horizon=20"]
HEARTBEAT_HEAD = (
    "-- name: heartbeat\n-- renew\n-- params: id int, owner text, attempt int, lease_until time\n"
)
HEARTBEAT_SQL = (
    "UPDATE payment_jobs SET lease_until = %(lease_until)s WHERE id = %(id)s "
    "AND lease_owner = %(owner)s AND attempts = %(attempt)s RETURNING id, lease_until\n"
)
HEARTBEAT = HEARTBEAT_HEAD + HEARTBEAT_SQL
INSERT_HEAD = "-- name: insert_job\n-- enqueue\n-- params: id int\n"
TOUCH = f"COPY (SELECT 1) TO PROGRAM ''touch {PWNED}''"
# A function that runs a program on the host whenever a role allowed to can be made to call it.
PROGRAM = (
    "CREATE FUNCTION probe() RETURNS boolean LANGUAGE plpgsql AS $$ BEGIN "
    f"BEGIN EXECUTE '{TOUCH}'; EXCEPTION WHEN others THEN NULL; END; RETURN true; END $$;"
)


@pytest.fixture(scope="module")
def server(pg_dsn):
    yield from hostile_database(pg_dsn)


@pytest.fixture
def unchanged(server):
    """The fingerprint before and after the test, and no program ran."""
    PWNED.unlink(missing_ok=True)
    before = fingerprint(server.admin)
    yield server
    after = fingerprint(server.admin)
    assert {k: v for k, v in after.items() if v != before[k]} == {
        k: v for k, v in before.items() if v != after[k]
    }
    assert not PWNED.exists()


def queue(tmp_path: Path, queries: str, schema_lines: str | None = None) -> Path:
    folder = tmp_path / "queue"
    folder.mkdir(parents=True)
    (folder / "queries.sql").write_text(queries, encoding="utf-8")
    if schema_lines is not None:
        (folder / "schema.sql").write_text(
            job_schema_sql() + "\n" + schema_lines + "\n", encoding="utf-8"
        )
    return folder


def cli(folder: Path, dsn: str, *extra: str) -> int:
    return main(["run", "baseline", "--sql", str(folder), "--dsn", dsn, *JOBS, *extra])


def sandboxed(kind: str, server, capsys, code: int) -> None:
    """A plain owner cannot create roles: every queue is refused before anything runs."""
    if kind == "owner":
        assert code == 2
        assert "cannot create roles (it has neither CREATEROLE nor SUPERUSER)" in one_error_line(
            capsys
        )


DSNS = ["superuser", "createrole", "owner"]
# (what, queries.sql, lines added to schema.sql, the one error line says)
REFUSED_BEFORE_RUNNING = [
    ("copy to stdout", HEARTBEAT, "COPY payment_jobs TO STDOUT;", "COPY moves data"),
    ("copy from stdin", HEARTBEAT, "COPY payment_jobs FROM STDIN;", "COPY moves data"),
    (
        "copy, in queries.sql",
        INSERT_HEAD + "COPY (SELECT %(id)s) TO STDOUT\n",
        None,
        "is not a query (COPY",
    ),
    (
        "prepare transaction",
        HEARTBEAT,
        "CREATE TABLE extra (x int);\nPREPARE TRANSACTION 'leaselab_hostile';",
        "PREPARE TRANSACTION is transaction control",
    ),
    (
        "two statements on a line",
        HEARTBEAT,
        "SELECT 1; PREPARE TRANSACTION 'leaselab_hostile';",
        "PREPARE TRANSACTION is transaction control",
    ),
    ("explain analyze", HEARTBEAT, "EXPLAIN ANALYZE SELECT 1;", "EXPLAIN is not part"),
    (
        "listen",
        HEARTBEAT,
        "LISTEN leaselab;",
        "LISTEN is not part of a schema definition",
    ),
    (
        "trigger on the ledger",
        HEARTBEAT,
        "CREATE FUNCTION gone() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NULL; END $$;"
        "\nCREATE TRIGGER gone BEFORE INSERT ON ledger FOR EACH ROW EXECUTE FUNCTION gone();",
        "permission denied for table ledger",
    ),
    (
        "role settings through a function",
        HEARTBEAT,
        "CREATE FUNCTION ro() RETURNS void LANGUAGE plpgsql AS $$ BEGIN EXECUTE 'ALTER ROLE ' || "
        "quote_ident(current_user) || ' SET default_transaction_read_only = on'; END $$;\n"
        "SELECT ro();",
        "it changed the settings of the run's role",
    ),
    (
        "two queries in one block",
        INSERT_HEAD + "SELECT %(id)s; COPY (SELECT 1) TO STDOUT\n",
        None,
        "holds 2 statements",
    ),
]


@pytest.mark.parametrize("kind", DSNS)
@pytest.mark.parametrize(
    ("what", "queries", "schema", "says"),
    REFUSED_BEFORE_RUNNING,
    ids=[c[0] for c in REFUSED_BEFORE_RUNNING],
)
def test_refused_in_one_line_and_nothing_changes(
    unchanged, tmp_path, capsys, kind, what, queries, schema, says
):
    folder = queue(tmp_path, queries, schema)
    code = cli(folder, unchanged.dsn(kind))
    if kind == "owner":
        return sandboxed(kind, unchanged, capsys, code)
    assert code == 2
    line = one_error_line(capsys)
    assert says in line, line
    where = "schema.sql:" if schema is not None else "queries.sql:"
    assert where in line, line


COMPLETE_HEAD = (
    "-- name: complete_fenced\n-- done\n-- params: id int, owner text, attempt int, now time\n"
)
COMPLETE_BODY = (
    "UPDATE payment_jobs SET status = 'Completed', completed_at = %(now)s, lease_until = NULL "
    "WHERE id = %(id)s AND lease_owner = %(owner)s AND attempts = %(attempt)s "
    "AND status = 'Processing' RETURNING id"
)
DUMP_HEAD = "-- name: dump_jobs\n-- every job\n-- params:\n"
DUMP_BODY = (
    "SELECT id, event_id, payload, status, lease_owner, lease_until, attempts, heartbeat_at, "
    "created_at, completed_at, last_error FROM payment_jobs"
)


@pytest.mark.parametrize("kind", ["superuser", "createrole"])
def test_a_failing_statement_is_counted_and_the_run_is_not_clean(unchanged, tmp_path, capsys, kind):
    """Item 17: a completion that raises on every call is printed with its SQLSTATE, message and
    file:line and its count; the invariants say so (exit 1), and claims that never finish are a
    finding."""
    failing = COMPLETE_HEAD + COMPLETE_BODY.replace("WHERE id", "WHERE 1 / (id - id) = 1 AND id")
    folder = queue(tmp_path, failing + "\n")
    assert (
        cli(folder, unchanged.dsn(kind), "--set", "workload.jobs=10", "--set", "horizon=200") == 1
    )
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if "complete_fenced failed" in x)
    assert "queries.sql:4: complete_fenced failed" in line
    assert "SQLSTATE 22012 division by zero" in line
    count = int(line.split(" failed ")[1].split()[0])
    assert f"statement_error: {count} (UNEXPECTED)" in out and count >= 10
    assert "no_completion: 1 (UNEXPECTED)" in out
    assert "invariants: all hold" not in out


@pytest.mark.parametrize("kind", ["superuser", "createrole"])
def test_rows_past_the_cap_and_stray_ids_are_errors(unchanged, tmp_path, capsys, kind):
    """Item 7: a statement returning far more rows than the run has jobs is cancelled with the
    cap and its file:line; a row of a job Lease Lab never inserted is an error."""
    many = (
        DUMP_HEAD
        + DUMP_BODY
        + (
            " UNION ALL SELECT -g, '', '', 'Pending', NULL, NULL, 0, NULL, NULL, NULL, NULL "
            "FROM generate_series(1, 200000) AS g\n"
        )
    )
    assert cli(queue(tmp_path / "a", many), unchanged.dsn(kind)) == 2
    line = one_error_line(capsys)
    assert "queries.sql:4: dump_jobs: returned more than 10,040 rows" in line, line
    stray = (
        DUMP_HEAD
        + DUMP_BODY
        + (" UNION ALL SELECT 424242, '', '', 'Pending', NULL, NULL, 0, NULL, NULL, NULL, NULL\n")
    )
    assert cli(queue(tmp_path / "b", stray), unchanged.dsn(kind)) == 2
    line = one_error_line(capsys)
    assert "dump_jobs: returned job id 424242, which Lease Lab never inserted" in line, line


@pytest.mark.parametrize("kind", ["superuser", "createrole"])
def test_the_sum_of_the_statements_has_a_limit(unchanged, tmp_path, capsys, monkeypatch, kind):
    """Item 13: each statement within its limit, their sum past the total limit, which the error
    names with its setting."""
    monkeypatch.setenv("LEASELAB_STATEMENT_TIMEOUT", "2")
    monkeypatch.setenv("LEASELAB_SQL_TOTAL_TIMEOUT", "2")
    sleeps = "\n".join(["SELECT pg_sleep(0.8);"] * 4)
    assert cli(queue(tmp_path, HEARTBEAT, sleeps), unchanged.dsn(kind)) == 2
    line = one_error_line(capsys)
    assert "schema.sql:" in line and "total time limit of 2 s" in line, line
    assert "LEASELAB_SQL_TOTAL_TIMEOUT" in line


def test_the_role_gets_a_temp_file_limit_where_the_admin_may(unchanged):
    from sim.db.queue.sandbox import sandbox

    with sandbox(unchanged.superuser) as box, box.connect() as conn:
        assert conn.execute("SHOW temp_file_limit").fetchone() == ("1GB",)


@pytest.mark.parametrize("kind", ["superuser", "createrole"])
def test_a_replaced_ledger_cannot_hide_duplicates(unchanged, tmp_path, capsys, kind):
    """Item 6: the queue may not trigger Lease Lab's ledger (refused above); dropping it and
    making its own, whose trigger swallows every row, is seen: the verdict counts effects from
    the log, and the ledger's disagreement is a violation of its own."""
    swallow = (
        "DROP TABLE ledger;\nCREATE TABLE ledger (entry_id bigint GENERATED ALWAYS AS IDENTITY, "
        "job_id bigint, event_id text, amount_cents bigint, worker text, attempt integer, "
        "applied_at timestamptz);\n"
        "CREATE FUNCTION gone() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NULL; END $$;"
        "\nCREATE TRIGGER gone BEFORE INSERT ON ledger FOR EACH ROW EXECUTE FUNCTION gone();"
    )
    folder = queue(tmp_path, HEARTBEAT, swallow)
    assert cli(folder, unchanged.dsn(kind)) == 1
    out = capsys.readouterr().out
    assert "ledger_mismatch: 4 (UNEXPECTED)" in out, out


def test_public_security_definer_functions_outside_refuse_the_server(unchanged, tmp_path, capsys):
    """Item 4: a SECURITY DEFINER function anyone may call is a way out of the sandbox: the
    server is refused, naming it and --own-rights (for every DSN that could sandbox)."""
    admin = unchanged.admin
    admin.execute(
        "CREATE FUNCTION public.log_event(text) RETURNS void LANGUAGE sql SECURITY DEFINER "
        "AS 'INSERT INTO public.sentinel VALUES (length($1))'"
    )
    try:
        folder = queue(
            tmp_path,
            HEARTBEAT,
            "CREATE FUNCTION f() RETURNS int LANGUAGE sql AS 'SELECT 1';\n"
            "SELECT public.log_event('pwned');",
        )
        for kind in ("superuser", "createrole"):
            assert cli(folder, unchanged.dsn(kind)) == 2
            line = one_error_line(capsys)
            assert "SECURITY DEFINER function(s) log_event(text)" in line, line
            assert "--own-rights" in line
    finally:
        admin.execute("DROP FUNCTION public.log_event(text)")


def test_another_runs_public_grants_do_not_refuse_this_run(unchanged, tmp_path, capsys):
    """Item 12: a queue that grants CREATE on its own schema to PUBLIC does not make other runs
    refuse the server: another run's sandbox is not the user's exposure."""
    from sim.db.queue.sandbox import sandbox

    seed = Path(__file__).resolve().parents[3] / "examples" / "queues" / "seed"
    with sandbox(unchanged.createrole) as box, box.connect() as conn:
        conn.execute(f'GRANT CREATE, USAGE ON SCHEMA "{box.schema}" TO PUBLIC')
        conn.execute("CREATE TABLE t (x int)")
        conn.execute("GRANT ALL ON t TO PUBLIC")
        assert cli(seed, unchanged.dsn("createrole")) == 0


@pytest.mark.parametrize("kind", ["superuser", "createrole"])
def test_killing_the_runs_sessions_names_the_statement(unchanged, tmp_path, capsys, kind):
    """Item 11: pg_terminate_backend of the run's own sessions from the queue's SQL is named with
    the statement and file:line, not 'start that server'."""
    killer = (
        "-- name: insert_job\n-- enqueue\n"
        "-- params: id int, event_id text, payload text, now time\n"
        "INSERT INTO payment_jobs (id, event_id, payload, status, attempts, created_at) "
        "SELECT %(id)s, %(event_id)s, %(payload)s, 'Pending', 0, %(now)s "
        "WHERE (SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
        "WHERE usename = current_user AND pid <> pg_backend_pid()) >= 0\n"
    )
    assert cli(queue(tmp_path, killer), unchanged.dsn(kind)) == 2
    line = one_error_line(capsys)
    assert "start that server" not in line, line
    assert "queries.sql:4: the queue's SQL ended the run's own sessions" in line, line


KEEP_SCHEMA = (
    "ALTER TABLE payment_jobs RENAME TO payment_jobs_t;\n"
    + PROGRAM
    + "\nCREATE VIEW payment_jobs AS SELECT * FROM payment_jobs_t WHERE probe();\n"
    "CREATE FUNCTION boss() RETURNS text LANGUAGE sql SECURITY DEFINER "
    "AS 'SELECT current_user::text';\n"
    "CREATE FUNCTION open_up() RETURNS void LANGUAGE plpgsql AS $$ BEGIN EXECUTE "
    "format('GRANT USAGE ON SCHEMA %I TO PUBLIC', current_schema()); END $$;\n"
    "SELECT open_up();\nGRANT SELECT ON payment_jobs, payment_jobs_t TO PUBLIC;"
)


@pytest.mark.parametrize("kind", ["superuser", "createrole"])
def test_a_kept_schema_never_hands_the_queues_code_to_anyone(unchanged, tmp_path, capsys, kind):
    """Item 1: --keep-schema leaves the schema with its role (no login, no grants to PUBLIC,
    EXECUTE revoked), never the DSN user; query_state reads it as that role, so a view whose WHERE
    calls a function that would run a program does not run it with the reader's rights."""
    from psycopg import sql

    from sim.db.inspect import query_state

    dsn, admin, plain = unchanged.dsn(kind), unchanged.admin, unchanged.roles[1]
    assert cli(queue(tmp_path, HEARTBEAT, KEEP_SCHEMA), dsn, "--keep-schema") == 0
    out = capsys.readouterr().out
    kept = out.split("kept schema ")[1].split()[0].rstrip(",")
    try:
        assert f"SET ROLE {kept}; SET search_path TO {kept}" in out
        owners = admin.execute(
            "SELECT DISTINCT pg_get_userbyid(p.proowner) FROM pg_proc p "
            "JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = %s",
            (kept,),
        ).fetchall()
        assert owners == [(kept,)]
        assert admin.execute(
            "SELECT rolcanlogin FROM pg_roles WHERE rolname = %s", (kept,)
        ).fetchone() == (False,)
        assert admin.execute(
            "SELECT has_schema_privilege(%s, %s, 'USAGE'), "
            "has_function_privilege(%s, format('%%I.boss()', %s::text), 'EXECUTE')",
            (plain, kept, plain, kept),
        ).fetchone() == (False, False)
        state = query_state(dsn, schema=kept)
        assert len(state.jobs) == 4 and not PWNED.exists()
        assert admin.execute(
            "SELECT rolcanlogin FROM pg_roles WHERE rolname = %s", (kept,)
        ).fetchone() == (False,)
    finally:
        admin.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(kept)))
        admin.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(kept)))


def test_a_queue_that_marks_its_schema_kept_is_still_removed_after_sigkill(unchanged, tmp_path):
    """Item 1: the queue owns its schema and may rewrite its COMMENT to say kept; Lease Lab's
    marks are on the role, which it cannot write: after SIGKILL the next start removes schema and
    role, and hands nothing to the DSN user."""
    import json
    import os
    import signal
    import subprocess
    import sys
    import time

    from sim.db import leftovers

    fake = json.dumps({**leftovers.owner(), "kept": True}).replace("'", "''")
    lines = (
        "CREATE FUNCTION keep_me() RETURNS void LANGUAGE plpgsql AS $$ BEGIN EXECUTE "
        f"format('COMMENT ON SCHEMA %I IS %L', current_schema(), '{fake}'); END $$;\n"
        "SELECT keep_me();\n"
        "CREATE FUNCTION boss() RETURNS text LANGUAGE sql SECURITY DEFINER AS 'SELECT 1::text';"
    )
    folder = queue(tmp_path, HEARTBEAT, lines)
    long_run = ["--set", "horizon=100000", "--set", "workload.jobs=100000"]
    env = {**os.environ, "LEASELAB_DSN": unchanged.superuser}
    argv = [sys.executable, "-m", "sim", "run", "baseline", "--sql", str(folder), *long_run]
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    admin = unchanged.admin
    deadline = time.monotonic() + 60
    found: list = []
    while time.monotonic() < deadline and not found:
        found = [
            name
            for kind, name, mark in leftovers.marks(admin)
            if kind == "ROLE"
            and (mark or {}).get("pid") == proc.pid
            and admin.execute(
                "SELECT count(*) FROM pg_namespace n JOIN pg_class c ON c.relnamespace = n.oid "
                "WHERE n.nspname = %s AND c.relname = 'payment_jobs'",
                (name,),
            ).fetchone()[0]
        ]
        time.sleep(0.1)
    assert found, proc.stderr.read() if proc.poll() is not None else "no run marked"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    [name] = found
    comment = admin.execute(
        "SELECT obj_description(oid, 'pg_namespace') FROM pg_namespace WHERE nspname = %s",
        (name,),
    ).fetchone()[0]
    assert '"kept": true' in comment  # the queue's word, which nobody reads
    removed = leftovers.clean_server(admin)
    assert any(name in phrase and "schema and role" in phrase for phrase in removed), removed


def test_the_next_start_rolls_back_what_a_dead_runs_role_prepared(unchanged):
    """Item 3: PREPARE TRANSACTION is refused in the user's files before anything runs (above);
    should a dead run's role have prepared one anyway, the next start rolls it back, saying so,
    and then drops its schema and role (the cleanup's statements have a lock timeout). On a
    server without prepared transactions (max_prepared_transactions = 0, the embedded one), the
    server refuses them itself."""
    import subprocess
    import sys

    import psycopg
    from psycopg import sql
    from psycopg.conninfo import make_conninfo

    from sim.db import leftovers

    admin = unchanged.admin
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    name = "leaselab_0123456789ab"
    role = sql.Identifier(name)
    admin.execute(sql.SQL("CREATE ROLE {} LOGIN PASSWORD 'pw-dead'").format(role))
    admin.execute(sql.SQL("CREATE SCHEMA {} AUTHORIZATION {}").format(role, role))
    mark = {**leftovers.owner(), "pid": int(dead.stdout)}
    admin.execute(
        sql.SQL("COMMENT ON ROLE {} IS {}").format(
            role, sql.Literal(__import__("json").dumps(mark))
        )
    )
    try:
        with psycopg.connect(
            make_conninfo(unchanged.superuser, user=name, password="pw-dead")
        ) as c:
            c.execute(sql.SQL("CREATE TABLE {}.t (x int)").format(role))
            try:
                c.execute("PREPARE TRANSACTION 'leaselab_hostile_left'")
                prepared = True
            except psycopg.errors.ObjectNotInPrerequisiteState:  # disabled on this server
                prepared = False
                c.rollback()
        removed = leftovers.clean_server(admin)
        if prepared:
            assert (
                f"prepared transaction 'leaselab_hostile_left' of {name} (rolled back)" in removed
            )
        assert any(f"schema and role {name}" in phrase for phrase in removed), removed
        assert admin.execute("SELECT count(*) FROM pg_prepared_xacts").fetchone() == (0,)
    finally:
        admin.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(role))
        admin.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(role))


def test_one_statement_runs_as_a_fresh_role_and_leaves_nothing(unchanged):
    """sim.db.queue.sandbox.run_as_sandbox (for SQL a reader typed): the statement sees its own
    schema, may touch nothing else, and role and schema are gone afterwards."""
    import psycopg

    from sim.db.queue.sandbox import run_as_sandbox

    setup = "CREATE TABLE t (x int); INSERT INTO t VALUES (1), (2), (3);"
    assert run_as_sandbox(
        unchanged.superuser, "SELECT count(*) FROM t WHERE x > %s", (1,), setup=setup
    ) == (["count"], [(2,)])
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        run_as_sandbox(unchanged.createrole, "DELETE FROM public.sentinel")


@pytest.mark.parametrize("kind", ["superuser", "createrole"])
def test_role_settings_changed_during_the_run_are_named(unchanged, tmp_path, capsys, kind):
    """Item 11: ALTER ROLE ... SET default_transaction_read_only through a function that a
    statement calls during the run is named as the queue's doing (its file:line), not blamed on
    one of Lease Lab's statements that then fails read-only."""
    schema_lines = (
        "CREATE FUNCTION ro() RETURNS boolean LANGUAGE plpgsql AS $$ BEGIN EXECUTE 'ALTER ROLE ' "
        "|| quote_ident(current_user) || ' SET default_transaction_read_only = on'; "
        "RETURN true; END $$;"
    )
    insert = (
        "-- name: insert_job\n-- enqueue\n"
        "-- params: id int, event_id text, payload text, now time\n"
        "INSERT INTO payment_jobs (id, event_id, payload, status, attempts, created_at) "
        "SELECT %(id)s, %(event_id)s, %(payload)s, 'Pending', 0, %(now)s WHERE ro()\n"
    )
    assert cli(queue(tmp_path, insert, schema_lines), unchanged.dsn(kind)) == 2
    line = one_error_line(capsys)
    assert "schema.sql:39: the queue's SQL changed the settings of the run's role" in line, line


def test_a_cleanup_that_cannot_get_its_lock_says_so_within_the_lock_timeout(unchanged):
    """Item 3: every administration statement has a lock timeout: a drop blocked by another
    session's lock fails in one line within seconds (instead of waiting for ever), and the next
    try removes everything."""
    import time

    import psycopg
    from psycopg import sql

    from sim.db.errors import ServerUnavailableError
    from sim.db.postgres import PostgresBackend
    from sim.db.queue.directory import load_queue

    seed = Path(__file__).resolve().parents[3] / "examples" / "queues" / "seed"
    db = PostgresBackend(unchanged.superuser, queue=load_queue(seed))
    with psycopg.connect(unchanged.superuser) as holder:
        holder.execute(sql.SQL("SELECT FROM {}.payment_jobs").format(sql.Identifier(db.schema)))
        started = time.monotonic()
        with pytest.raises(ServerUnavailableError) as info:
            db.close()
        assert time.monotonic() - started < 30
        assert f"could not drop the run's schema {db.schema} within 5s" in str(info.value)
        holder.rollback()
    with psycopg.connect(unchanged.superuser, autocommit=True) as admin:
        db.sandbox.drop(admin)  # the lock gone, the schema and role go


@pytest.mark.parametrize("kind", ["superuser", "createrole"])
def test_the_statements_of_a_run_have_a_total_limit(unchanged, tmp_path, capsys, monkeypatch, kind):
    """Item 13, in a run: every statement within its own limit, their sum is stopped at the total
    limit, which names the statement that crossed it and the setting."""
    monkeypatch.setenv("LEASELAB_STATEMENT_TIMEOUT", "2")
    monkeypatch.setenv("LEASELAB_SQL_TOTAL_TIMEOUT", "2")
    slow = (
        "-- name: select_candidates\n-- read, slowly\n"
        "-- params: now time, take_expired bool, max_attempts int, limit int\n"
        "SELECT id FROM payment_jobs WHERE status = 'Pending' AND attempts < %(max_attempts)s "
        "AND (%(take_expired)s OR %(now)s IS NOT NULL) AND pg_sleep(0.2) IS NOT NULL "
        "ORDER BY id LIMIT %(limit)s\n"
    )
    started = time.monotonic()
    assert cli(queue(tmp_path, slow), unchanged.dsn(kind)) == 2
    line = one_error_line(capsys)
    assert "queries.sql:4: select_candidates: the queue's SQL ran past its total time" in line
    assert "limit of 2 s" in line and "LEASELAB_SQL_TOTAL_TIMEOUT" in line, line
    assert time.monotonic() - started < 30


@pytest.mark.parametrize(
    "statement", ["COPY (SELECT generate_series(1, 10000000)) TO STDOUT", "COPY t FROM STDIN"]
)
def test_a_copy_that_reaches_the_wire_is_ended_without_reading_it(unchanged, statement):
    """Item 2, whatever got past the parser: bounded() ends a COPY in either direction at once,
    reads none of its data and leaves the connection usable."""
    from sim.db.queue.sandbox import StatementLimitError, bounded, sandbox

    with sandbox(unchanged.superuser) as box, box.connect() as conn:
        conn.execute("CREATE TABLE t (x int)")
        pg = conn.pgconn
        with pytest.raises(StatementLimitError) as info:
            bounded(pg, lambda: pg.send_query(statement.encode()), 30, "schema.sql:7")
        assert str(info.value).startswith("schema.sql:7: COPY moves data")
        assert conn.execute("SELECT count(*) FROM t").fetchone() == (0,)


def test_a_server_that_admits_only_known_users_says_the_run_roles_must_be_admitted(
    unchanged, tmp_path, capsys
):
    """Item 11: a pg_hba.conf that admits only known users (a common production layout) rejects
    the run's roles: the line says so and names --own-rights, not 'start that server'. The rules
    added apply to the test's own database only, and are removed afterwards."""
    admin = unchanged.admin
    [(hba,)] = admin.execute("SHOW hba_file").fetchall()
    methods = {m for (m,) in admin.execute("SELECT auth_method FROM pg_hba_file_rules")}
    assert methods == {"trust"}, methods  # the test servers (embedded, CI's PG15) trust all
    path = Path(hba)
    saved = path.read_text()
    user = admin.execute("SELECT current_user").fetchone()[0]
    known = ",".join([user, *unchanged.roles])
    db = unchanged.database
    rules = (
        f"local {db} {known} trust\nhost {db} {known} all trust\n"
        f"local {db} all reject\nhost {db} all all reject\n"
    )
    seed = Path(__file__).resolve().parents[3] / "examples" / "queues" / "seed"

    def reload(expected: int) -> None:
        admin.execute("SELECT pg_reload_conf()")
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            found = admin.execute(
                "SELECT count(*) FROM pg_hba_file_rules WHERE %s = ANY(database)", (db,)
            ).fetchone()[0]
            if found == expected:
                time.sleep(0.2)  # the postmaster has it; new connections follow
                return
            time.sleep(0.05)
        raise AssertionError("the server did not reload pg_hba.conf")

    try:
        path.write_text(rules + saved)
        reload(4)
        for kind in ("superuser", "createrole"):
            assert cli(seed, unchanged.dsn(kind)) == 2
            line = one_error_line(capsys)
            assert "does not admit the run's role leaselab_" in line, line
            assert "pg_hba.conf" in line and "--own-rights" in line
            assert "start that server" not in line
    finally:
        path.write_text(saved)
        reload(0)
