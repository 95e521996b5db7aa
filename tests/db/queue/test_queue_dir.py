"""A user's queue directory (sim.db.queue.directory): every bad definition gets one error line
naming file:line and the statement, before anything runs; good ones merge with Lease Lab's
statements."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from sim.db.queries import load_queries
from sim.db.queue.contracts import CONTRACTS, contracts_markdown, statements_called
from sim.db.queue.directory import QueueDefinitionError, load_queue
from sim.scenario.settings import resolve

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = ROOT / "examples" / "queues"

CLAIM = """\
-- name: claim_conditional
-- My claim.
-- params: id int, owner text, now time, lease_until time
UPDATE payment_jobs
SET status = 'Processing', lease_owner = %(owner)s, lease_until = %(lease_until)s, \
attempts = attempts + 1
WHERE id = %(id)s AND (status = 'Pending' OR lease_until < %(now)s)
RETURNING id, attempts;
"""


def queue(tmp_path: Path, queries: str, schema: str | None = None) -> Path:
    d = tmp_path / "myqueue"
    d.mkdir(exist_ok=True)
    (d / "queries.sql").write_text(queries, encoding="utf-8")
    if schema is not None:
        (d / "schema.sql").write_text(schema, encoding="utf-8")
    return d


def error(tmp_path, queries, schema=None, dsn=None) -> str:
    with pytest.raises(QueueDefinitionError) as info:
        q = load_queue(queue(tmp_path, queries, schema))
        if dsn is not None:
            q.check_on(dsn)
    message = str(info.value)
    assert "\n" not in message
    return message.replace(str(tmp_path / "myqueue") + "/", "")


def test_a_good_override_replaces_the_statement_and_keeps_the_rest(tmp_path):
    q = load_queue(queue(tmp_path, "-- header comment\n\n" + CLAIM))
    assert list(q.overrides) == ["claim_conditional"]
    o = q.overrides["claim_conditional"]
    assert (o.line, o.sql_line, o.description) == (3, 6, "My claim.")
    merged = q.queries
    assert merged["claim_conditional"].sql.startswith("UPDATE payment_jobs\nSET status")
    assert merged["claim_conditional"].params == load_queries()["claim_conditional"].params
    assert merged["heartbeat"] is load_queries()["heartbeat"]
    assert q.where("claim_conditional") == f"{tmp_path}/myqueue/queries.sql:6"
    assert q.where("heartbeat") == "Lease Lab's sql/queries.sql"
    assert "CREATE TABLE payment_jobs" in q.schema_sql and "CREATE TABLE ledger" in q.schema_sql


@pytest.mark.parametrize(
    "queries, expected",
    [
        (
            "-- name: claim_conditonal\n-- x\n-- params: id int\nUPDATE t SET a = 1 WHERE id = "
            "%(id)s RETURNING id, a;\n",
            "queries.sql:1: claim_conditonal: unknown statement name (did you mean "
            "claim_conditional?); a queue can define ",
        ),
        (
            "-- name: insert_ledger_entry\n-- x\n-- params:\nSELECT 1;\n",
            "queries.sql:1: insert_ledger_entry: is Lease Lab's bookkeeping (dedup markers and "
            "ledger stay Lease Lab's); remove it",
        ),
        (
            CLAIM.replace("-- params: id int, owner text, now time, lease_until time\n", ""),
            "queries.sql:1: claim_conditional: no '-- params:' line after the description",
        ),
        (
            CLAIM.replace("lease_until time", "lease_until time, queue text"),
            "queries.sql:3: claim_conditional: declares queue, which Lease Lab does not bind to "
            "claim_conditional; it binds id int, owner text, now time, lease_until time",
        ),
        (
            CLAIM.replace(", lease_until time", ""),
            "queries.sql:5: claim_conditional: uses %(lease_until)s, which its -- params: line "
            "does not declare (Lease Lab binds it as time: add 'lease_until time')",
        ),
        (
            CLAIM.replace("owner text", "owner int"),
            "queries.sql:3: claim_conditional: declares owner int, but Lease Lab binds owner as "
            "text",
        ),
        (
            CLAIM.replace("lease_owner = %(owner)s, ", ""),
            "queries.sql:3: claim_conditional: declares owner but never uses %(owner)s",
        ),
        (
            CLAIM.replace("id int, ", "").replace("WHERE id = %(id)s AND", "WHERE"),
            "queries.sql:4: claim_conditional: must use %(id)s (the job Lease Lab means); it uses "
            "lease_until, now, owner",
        ),
        (
            CLAIM.replace("owner text", "owner string"),
            "queries.sql:3: claim_conditional: parameter owner has unknown type string (int, text, "
            "bool, time or interval)",
        ),
        (CLAIM + "\n" + CLAIM, "queries.sql:9: claim_conditional: defined twice (first at line 1)"),
        (
            "-- name: dump_jobs\n-- x\n-- params:\n",
            "queries.sql:1: dump_jobs: has no statement, and every run needs one",
        ),
        ("SELECT 1;\n", "queries.sql:1: no '-- name: NAME' block"),
    ],
)
def test_bad_text_is_one_line_naming_file_line_and_statement(tmp_path, queries, expected):
    assert error(tmp_path, queries).startswith(expected)


def test_a_missing_directory_or_file_is_named(tmp_path):
    with pytest.raises(QueueDefinitionError, match="not a directory"):
        load_queue(tmp_path / "nope")
    with pytest.raises(QueueDefinitionError, match=r"no queries\.sql in it"):
        load_queue(tmp_path)


def test_an_empty_block_leaves_an_optional_statement_out(tmp_path):
    q = load_queue(queue(tmp_path, "-- name: heartbeat\n-- We have none.\n-- params:\n"))
    assert q.overrides["heartbeat"].sql == ""
    assert q.sql_of("heartbeat") is None
    assert "heartbeat" not in {n for n, o in q.overrides.items() if o.sql}


def test_statements_called_follow_the_policy():
    s = resolve("gc-pause-zombie")
    assert set(statements_called(s)) == {
        "insert_job",
        "dump_jobs",
        "select_candidates",
        "claim_conditional",
        "heartbeat",
        "complete_fenced",
        "reject_job_fenced",
        "requeue_expired",
    }
    river = resolve("river")
    assert set(statements_called(river)) == {
        "insert_job",
        "dump_jobs",
        "claim_skip_locked",
        "complete_unfenced",
        "requeue_expired",
    }


def test_every_contract_is_a_project_statement_and_documented_in_the_readme():
    assert set(CONTRACTS) <= set(load_queries())
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert contracts_markdown() in readme


def test_the_memory_backend_refuses_a_queue_in_one_line(tmp_path):
    import sim
    from sim.errors import ConfigError

    with pytest.raises(
        ConfigError,
        match=r"^--sql .*: the simulated database \(backend memory\) only knows Lease "
        r"Lab's own statements; .* use backend postgres$",
    ):
        sim.run("baseline", backend="memory", sql=EXAMPLES / "seed")
    with pytest.raises(ConfigError, match=r"the simulated database \(backend memory\)"):
        sim.run("baseline", sql=EXAMPLES / "seed", **{"backend": "memory"})
    with pytest.raises(ConfigError, match=r"the simulated database \(backend memory\)"):
        sim.review("baseline", sql=EXAMPLES / "seed", backend="memory")
    with pytest.raises(ConfigError, match=r"the simulated database \(backend memory\)"):
        sim.sweep("baseline", {"backend": ["memory", "postgres"]}, sql=EXAMPLES / "seed")
    for argv in (
        ["run", "baseline", "--backend", "memory"],
        ["run", "baseline", "--set", "backend=memory"],
        ["review", "baseline", "--set", "backend=memory"],
        ["sweep", "baseline", "--set", "backend=memory"],
    ):
        out = subprocess.run(
            [sys.executable, "-m", "sim", *argv, "--sql", str(EXAMPLES / "seed")],
            capture_output=True,
            text=True,
            cwd=ROOT,
        )
        assert out.returncode == 2, argv
        assert out.stderr.startswith("error: --sql ") and out.stderr.count("\n") == 1, (
            argv,
            out.stderr,
        )
        assert "backend memory" in out.stderr


# ---- on a server: PREPARE against the schema, returned columns -----------------------------------


@pytest.mark.postgres
@pytest.mark.parametrize(
    "queries, schema, expected",
    [
        (
            CLAIM.replace("WHERE id", "WHERE idd"),
            None,
            "queries.sql:6: claim_conditional: PostgreSQL cannot PREPARE it against Lease Lab's "
            "job table (sql/schema.sql): "
            'column "idd" does not exist',
        ),
        (
            CLAIM.replace("RETURNING id, attempts", "RETURNING id"),
            None,
            "queries.sql:4: claim_conditional: returns 1 column(s) (id); Lease Lab reads exactly "
            "2: id bigint, attempts bigint",
        ),
        (
            CLAIM.replace("RETURNING id, attempts;", ";"),
            None,
            "queries.sql:4: claim_conditional: returns 0 column(s) (no columns); Lease Lab reads "
            "exactly 2: id bigint, attempts bigint (add RETURNING ...)",
        ),
        (
            CLAIM.replace("RETURNING id, attempts", "RETURNING id, lease_owner"),
            None,
            "queries.sql:4: claim_conditional: column 2 (lease_owner) is text; Lease Lab reads it "
            "as attempts bigint (cast it: ...::bigint)",
        ),
        (
            CLAIM,
            "CREATE TABLE jobs (id bigint PRIMARY KEY);\nCREATE TABLE oops (x nosuchtype);\n",
            'schema.sql:2: PostgreSQL cannot run it: type "nosuchtype" does not exist',
        ),
        (
            CLAIM,
            "CREATE TABLE jobs (id bigint PRIMARY KEY, state text);\n",
            "queries.sql:4: claim_conditional: PostgreSQL cannot PREPARE it against ",
        ),
        (
            "-- name: heartbeat\n-- none\n-- params:\n",
            "CREATE TABLE jobs (id bigint PRIMARY KEY);\n",
            "queries.sql: insert_job: not in queries.sql, and Lease Lab's text does not fit "
            "schema.sql: relation "
            '"payment_jobs" does not exist; every run needs it: define it in queries.sql',
        ),
        (
            "-- name: heartbeat\n-- none\n-- params:\n",
            "CREATE TABLE payment_jobs (id bigint);\n\nCREATE TABLE public.evil (x int);\n",
            "schema.sql:3: PostgreSQL refuses it to the run's role: permission denied for schema "
            "public; a queue's SQL may touch only the run's own schema (keep names unqualified)",
        ),
        (
            "-- name: heartbeat\n-- none\n-- params:\n",
            "SET search_path TO public;\nCREATE TABLE x (id int);\n",
            "schema.sql:1: SET changes the session's settings, which Lease Lab sets",
        ),
    ],
)
def test_statements_are_prepared_against_the_schema(tmp_path, pg_dsn, queries, schema, expected):
    assert error(tmp_path, queries, schema, dsn=pg_dsn).startswith(expected)


@pytest.mark.postgres
@pytest.mark.server_wide  # counts every leaselab schema and role
def test_the_check_leaves_nothing_behind(tmp_path, pg_dsn, admin):
    ours = (
        "SELECT (SELECT array_agg(nspname) FROM pg_namespace WHERE nspname LIKE 'leaselab%'),"
        " (SELECT array_agg(rolname) FROM pg_roles WHERE rolname LIKE 'leaselab%')"
    )
    before = admin.execute(ours).fetchone()
    q = load_queue(EXAMPLES / "river-like")
    q.check_on(pg_dsn)
    assert admin.execute(ours).fetchone() == before
    assert q.missing["heartbeat"] == "left out by an empty block"
    assert q.missing["claim_conditional"].startswith(
        "not in queries.sql, and Lease Lab's text does not fit "
        'schema.sql: relation "payment_jobs" does not exist'
    )
    assert q.missing["requeue_expired"] == "left out by an empty block"  # it rescues in two steps
    assert set(q.missing) == set(CONTRACTS) - {
        "insert_job",
        "claim_skip_locked",
        "complete_unfenced",
        "select_stuck_jobs",
        "rescue_job",
        "dump_jobs",
    }


@pytest.mark.postgres
def test_every_missing_statement_is_named_in_one_error_before_anything_runs(pg_dsn, tmp_path):
    """gc-pause-zombie on a queue with its own schema, its own claim and no heartbeat: the four
    statements the runs would call and it lacks, grouped by why, in one line; a sweep over
    several scenarios gets one error too, naming what each setting calls."""
    import sim

    d = queue(
        tmp_path,
        "-- name: insert_job\n-- x\n-- params: id int, now time\n"
        "INSERT INTO jobs (id, created_at) VALUES (%(id)s, %(now)s);\n"
        "-- name: heartbeat\n-- none\n-- params:\n"
        "-- name: dump_jobs\n-- x\n-- params:\n"
        "SELECT id, NULL::text, NULL::text, 'Pending', NULL::text, NULL::timestamptz, 0::bigint, "
        "NULL::timestamptz, created_at, NULL::timestamptz, NULL::text FROM jobs;\n",
        "CREATE TABLE jobs (id bigint PRIMARY KEY, created_at timestamptz);\n",
    )
    with pytest.raises(QueueDefinitionError) as info:
        sim.run("gc-pause-zombie", sql=d, dsn=pg_dsn)
    misfit = (
        "not in queries.sql, and Lease Lab's text does not fit schema.sql: "
        'relation "payment_jobs" does not exist'
    )
    assert str(info.value) == (
        f"{d}/queries.sql: the runs call 6 statements this queue lacks: select_candidates "
        "(policy.claim = conditional_update), claim_conditional (policy.claim = "
        "conditional_update), complete_fenced (policy.fencing = true), reject_job_fenced "
        f"(policy.dedup = true), requeue_expired (policy.watcher = true): {misfit}; heartbeat "
        "(policy.heartbeat = true): left out by an empty block; define them in queries.sql or "
        "change policy.claim, policy.dedup, policy.fencing, policy.heartbeat, policy.watcher"
    )
    with pytest.raises(QueueDefinitionError) as info:
        sim.sweep(
            "gc-pause-zombie",
            {"policy.claim": ["skip_locked", "select_for_update"]},
            sql=d,
            dsn=pg_dsn,
            executor="serial",
        )
    message = str(info.value)
    assert "\n" not in message and message.count("the runs call") == 1
    assert "claim_skip_locked (policy.claim = skip_locked)" in message
    assert "lock_next_candidate (policy.claim = select_for_update)" in message
    assert "claim_unconditional (policy.claim = select_for_update)" in message


@pytest.mark.postgres
def test_a_read_then_write_rescue_without_a_watcher_gap_is_told_how_to_run(pg_dsn, tmp_path):
    import sim

    rescue = load_queries()["rescue_job"]
    used = [(p, t) for p, t in rescue.params if f"%({p})s" in rescue.sql]
    d = queue(
        tmp_path,
        "-- name: requeue_expired\n-- none\n-- params:\n"
        f"-- name: rescue_job\n-- by id\n-- params: {', '.join(f'{p} {t}' for p, t in used)}\n"
        f"{rescue.sql};\n",
    )
    with pytest.raises(QueueDefinitionError) as info:
        sim.run("crash-recovery", sql=d, dsn=pg_dsn)
    assert str(info.value).endswith(
        "requeue_expired (policy.watcher = true): left out by an empty block; define it in "
        "queries.sql or change policy.watcher (this queue rescues by read-then-write, "
        "select_stuck_jobs then rescue_job: set policy.watcher_gap > 0, e.g. in queue.toml)"
    )
    ok = sim.run("crash-recovery", sql=d, dsn=pg_dsn, **{"policy.watcher_gap": 0.5})
    assert int((ok.events["kind"] == "requeue").sum()) > 0


PASTED = "UPDATE payment_jobs SET status = 'Completed' WHERE {} RETURNING id;\n"


@pytest.mark.parametrize(
    "where, expected",
    [
        (
            "id = $1",
            "queries.sql:4: complete_unfenced: uses $1, a positional placeholder; Lease Lab binds "
            "by name, as %(name)s: complete_unfenced binds id int, now time: write %(id)s and the "
            "like",
        ),
        (
            "id = @id",
            "queries.sql:4: complete_unfenced: uses @id, another driver's named placeholder; Lease "
            "Lab binds as %(name)s: write %(id)s",
        ),
        (
            "id = :id AND status::text <> 'a:b'",
            "queries.sql:4: complete_unfenced: uses :id, another driver's named placeholder; Lease "
            "Lab binds as %(name)s: write %(id)s",
        ),
        (
            "id = sqlc.arg(id)",
            "queries.sql:4: complete_unfenced: uses sqlc.arg(id), another driver's named "
            "placeholder; Lease Lab binds as %(name)s: write %(id)s",
        ),
        (
            "id = @job_id",
            "queries.sql:4: complete_unfenced: uses @job_id, another driver's named placeholder; "
            "Lease Lab binds as %(name)s: complete_unfenced binds id int, now time: write one of "
            "those, e.g. %(id)s",
        ),
        (
            "id = %s",
            "queries.sql:4: complete_unfenced: uses %s, a positional placeholder; Lease Lab binds "
            "by name, as %(name)s: complete_unfenced binds id int, now time: write %(id)s and the "
            "like",
        ),
    ],
)
def test_placeholders_of_other_drivers_are_named_with_the_form_to_use(tmp_path, where, expected):
    text = "-- name: complete_unfenced\n-- pasted\n-- params: id int\n" + PASTED.format(where)
    assert error(tmp_path, text) == expected


def test_what_only_looks_like_a_placeholder_is_left_alone(tmp_path):
    where = (
        "id = %(id)s AND last_error <> '$1 @x :y' AND \"a:b\" IS NULL AND status::text = $$:z$$ "
        "AND (ARRAY[1, 2])[1:2] = ARRAY[1, 2] -- @id $2\n  /* :id */"
    )
    q = load_queue(
        queue(
            tmp_path, "-- name: complete_unfenced\n-- x\n-- params: id int\n" + PASTED.format(where)
        )
    )
    assert "@x" in q.overrides["complete_unfenced"].sql


@pytest.mark.postgres
def test_a_pasted_placeholder_is_one_error_line_from_the_command_line(tmp_path, pg_dsn):
    d = queue(
        tmp_path, "-- name: complete_fenced\n-- pasted\n-- params:\n" + PASTED.format("id = $1")
    )
    assert cli("run", "baseline", "--sql", str(d), "--dsn", pg_dsn) == (
        2,
        f"error: {d}/queries.sql:4: complete_fenced: uses $1, a positional placeholder; Lease Lab "
        "binds by name, as %(name)s: complete_fenced binds id int, owner text, attempt int, now "
        "time: write %(id)s and the like\n",
    )


def cli(*argv: str) -> tuple[int, str]:
    """(exit code, stderr) of python -m sim ARGV."""
    out = subprocess.run(
        [sys.executable, "-m", "sim", *argv], capture_output=True, text=True, cwd=ROOT
    )
    return out.returncode, out.stderr


@pytest.fixture
def admin(pg_dsn):
    import psycopg

    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        yield conn


def test_the_seed_example_is_lease_labs_own_text():
    """examples/queues/seed copies sql/queries.sql's statements on purpose (a template to start
    from); this keeps the copy from drifting."""
    seed = load_queue(EXAMPLES / "seed")
    assert set(seed.overrides) == {
        "claim_conditional",
        "heartbeat",
        "complete_fenced",
        "requeue_expired",
    }
    for name, o in seed.overrides.items():
        assert " ".join(o.sql.split()) == " ".join(load_queries()[name].sql.split()), name
        used = load_queries()[name].params[: len(o.declared)]  # stuck_after: bound, unused
        assert o.declared == used and load_queries()[name].params[len(used) :] in (
            (),
            (
                (
                    "stuck_after",
                    "interval",
                ),
            ),
        )


@pytest.mark.postgres
def test_a_status_lease_lab_does_not_know_is_named_after_the_run(tmp_path, pg_dsn):
    import sim

    dump = load_queries()["dump_jobs"].sql.replace("status,", "lower(status),")
    d = queue(tmp_path, f"-- name: dump_jobs\n-- Lower case.\n-- params:\n{dump};\n")
    with pytest.raises(QueueDefinitionError) as info:
        sim.run("gc-pause-zombie", sql=d, dsn=pg_dsn)
    assert str(info.value) == (
        f"{d}/queries.sql:4: dump_jobs: returned status 'completed'; Lease Lab reads Pending, "
        "Processing, Completed, Dead (map your states with CASE ... END)"
    )
