"""Notebook 08's exercise (sim.teaching.sql_exercise): the reader's SQL runs as a sandbox role,
read-only and rolled back, on tables holding every kind of row a wrong WHERE clause returns, then
on a second state drawn at random for each check. Issue 34, items 1 and 2: the wrong, boundary
and hostile answers a checker attacked it with."""

from __future__ import annotations

import os

import numpy as np
import pandas as pd
import psycopg
import pytest

import sim
from sim import teaching
from sim.db.queue import sandbox
from sim.errors import ConfigError
from sim.teaching import sql_exercise

RIGHT = "SELECT id FROM payment_jobs WHERE status = 'Processing' AND lease_until < %(now)s"


def _jobs(fixture_db) -> pd.DataFrame:
    return teaching.Script(fixture_db).table("jobs").set_index("id")


def test_the_visible_state_holds_every_row_a_wrong_where_clause_returns():
    db = sim.make_backend("memory")
    fixture = teaching.stuck_jobs_fixture(db)
    jobs = _jobs(db)
    now = fixture["now"]
    assert (fixture["stuck"], fixture["alive"], fixture["requeued"], fixture["dead"]) == (
        [1, 2],
        [6],
        [3],
        [7],
    )
    assert list(jobs.index) == list(range(1, 9))
    assert (jobs.loc[[1, 2], "status"] == "Processing").all()
    assert (jobs.loc[[1, 2], "lease_until"] < now).all()
    assert jobs.loc[6, "status"] == "Processing" and jobs.loc[6, "lease_until"] > now
    # requeued and dead keep their old lease_until: `status <> 'Completed'` would return them
    assert jobs.loc[3, "status"] == "Pending" and jobs.loc[3, "lease_until"] < now
    assert jobs.loc[7, "status"] == "Dead" and jobs.loc[7, "lease_until"] < now
    assert jobs.loc[[3, 7], "completed_at"].isna().all()
    assert jobs.loc[5, "status"] == "Completed" and jobs.loc[[4, 8], "attempts"].eq(0).all()
    with pytest.raises(ConfigError, match="stuck_jobs_fixture: states among"):
        teaching.stuck_jobs_fixture(sim.make_backend("memory"), states=("stuck", "lost"))
    with pytest.raises(ConfigError, match="now >= since"):
        teaching.stuck_jobs_fixture(sim.make_backend("memory"), now=50.0)


@pytest.mark.parametrize("seed", range(6))
def test_a_hidden_state_is_drawn_with_every_kind_of_row_other_ids_and_another_clock(seed):
    db = sim.make_backend("memory")
    hidden = sql_exercise.hidden_state(db, np.random.default_rng(seed))
    jobs = _jobs(db)
    assert jobs.index.min() >= 20 and len(jobs) == sum(len(hidden[s]) for s in sql_exercise.STATES)
    assert all(hidden[s] for s in sql_exercise.STATES), hidden
    now = hidden["now"]
    assert now > 200.0
    processing = jobs[jobs["status"] == "Processing"]
    assert sorted(processing.index[processing["lease_until"] < now]) == hidden["stuck"]
    assert (jobs.loc[hidden["alive"], "lease_until"] > now).all()
    assert (jobs.loc[hidden["requeued"] + hidden["dead"], "lease_until"] < now).all()
    other = sql_exercise.hidden_state(sim.make_backend("memory"), np.random.default_rng(seed + 6))
    assert other["now"] != now and other["stuck"] != hidden["stuck"]


# ---- on PostgreSQL: right, wrong and hostile answers ---------------------------------------------


@pytest.fixture(scope="module")
def exercise(pg_dsn):
    db = sim.make_backend("postgres", dsn=pg_dsn)
    fixture = teaching.stuck_jobs_fixture(db)
    yield db, fixture
    db.close()


@pytest.mark.postgres
@pytest.mark.parametrize(
    "answer",
    [
        RIGHT,
        RIGHT + ";",
        RIGHT.replace("= 'Processing'", "LIKE 'Proc%%'"),
        "select ID from PAYMENT_JOBS where STATUS = 'Processing' and LEASE_UNTIL < %(now)s",
    ],
)
def test_right_answers_pass_on_both_states(exercise, answer):
    db, fixture = exercise
    verdict = teaching.check_stuck_query(answer, db, fixture)
    assert verdict.ok is True and "drawn at random" in verdict.message, verdict


ALWAYS_THE_VISIBLE_IDS = (
    "SELECT unnest(CASE WHEN EXISTS (SELECT 1 FROM payment_jobs WHERE id = 1) THEN ARRAY[1, 2] "
    "ELSE ARRAY(SELECT id FROM payment_jobs WHERE status = 'Processing') END)"
)


@pytest.mark.postgres
@pytest.mark.parametrize(
    ("answer", "says"),
    [
        # item 1: requeued (Pending) and Dead jobs keep their old lease_until
        (
            "SELECT id FROM payment_jobs WHERE status <> 'Completed' AND lease_until < %(now)s",
            "3 is Pending again",
        ),
        (
            "SELECT id FROM payment_jobs WHERE completed_at IS NULL AND lease_until < %(now)s",
            "7 is Dead",
        ),
        ("SELECT id FROM payment_jobs WHERE lease_until < %(now)s", "5 is Completed"),
        ("SELECT id FROM payment_jobs WHERE status = 'Processing'", "6 is Processing, but"),
        (RIGHT.replace("%(now)s", "now()"), "not with the server's now()"),
        ("SELECT id FROM payment_jobs WHERE id > 100", "returned no rows"),
        (RIGHT.replace("Processing", "processing"), "'Processing', with a capital"),
        ("SELECT id FROM payment_jobs WHERE id = 1", "2 is stuck"),
        # ids, times or the visible table recognised by hand: the random hidden state fails them
        ("SELECT unnest(ARRAY[1, 2])", "draws at random and keeps hidden"),
        ("SELECT id FROM payment_jobs WHERE id IN (1, 2)", "draws at random and keeps hidden"),
        (
            RIGHT.replace("%(now)s", "'2026-01-01 00:01:40+00'"),
            "draws at random and keeps hidden",
        ),
        (ALWAYS_THE_VISIBLE_IDS, "draws at random and keeps hidden"),
        # writes and several statements change nothing
        (
            "UPDATE payment_jobs SET status = 'Pending' WHERE status = 'Processing' "
            "AND lease_until < %(now)s RETURNING id",
            "tries to change the tables",
        ),
        (
            "WITH gone AS (DELETE FROM payment_jobs WHERE status = 'Processing' RETURNING id) "
            "SELECT id FROM gone",
            "tries to change the tables",
        ),
        ("SELECT id FROM payment_jobs WHERE status = 'Processing' FOR UPDATE", "change the tables"),
        ("SELECT id FROM payment_jobs; UPDATE payment_jobs SET status = 'Dead'", "one statement"),
        ("SELEC nonsense", "PostgreSQL said: syntax error"),
        # item 2: psycopg's placeholder error is psycopg's, with the fix; no numpy repr
        (RIGHT.replace("= 'Processing'", "LIKE 'Proc%'"), "write a literal % as %%"),
        ("SELECT status = 'Processing', id FROM payment_jobs", "holds False."),
        ("SELECT 'x' AS job, 1", "yours (job) holds 'x'"),
        ("SELECT FROM payment_jobs", "rows without a column"),
        ("COPY (SELECT 1) TO STDOUT", "psycopg, the Python driver, refused it"),
    ],
)
def test_wrong_answers_get_the_reason_and_change_nothing(exercise, answer, says):
    db, fixture = exercise
    tables = "SELECT * FROM payment_jobs ORDER BY id"
    before = teaching.sql_frame(db, tables)
    verdict = teaching.check_stuck_query(answer, db, fixture)
    assert verdict.ok is False and says in verdict.message, verdict
    assert "np." not in verdict.message and "numpy" not in verdict.message
    pd.testing.assert_frame_equal(teaching.sql_frame(db, tables), before)


@pytest.fixture
def roles(monkeypatch):
    """The names of the sandbox roles the checker creates."""
    made: list[str] = []
    create = sandbox.create

    def recording(*args, **kwargs):
        box = create(*args, **kwargs)
        made.append(box.role)
        return box

    monkeypatch.setattr(sandbox, "create", recording)
    return made


def _gone(db, made: list[str]) -> bool:
    left = teaching.sql_frame(
        db, "SELECT count(*) FROM pg_roles WHERE rolname = ANY(%(r)s)", {"r": made}
    )
    return bool(made) and int(left.iloc[0, 0]) == 0


@pytest.mark.postgres
def test_the_statement_cannot_end_another_session(exercise, roles, pg_dsn):
    db, fixture = exercise
    with psycopg.connect(pg_dsn, application_name="leaselab:victim") as victim:
        answer = (
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE application_name = 'leaselab:victim'"
        )
        verdict = teaching.check_stuck_query(answer, db, fixture)
        assert verdict.ok is False and "PostgreSQL refused it" in verdict.message  # 42501
        assert victim.execute("SELECT 1").fetchone() == (1,)
    assert len(roles) == 1 and _gone(db, roles)  # refused on the visible state: no second run


@pytest.mark.postgres
def test_the_statement_cannot_run_a_program_or_read_a_server_file(exercise, roles, tmp_path):
    db, fixture = exercise
    touched = tmp_path / "touched"
    copy = f"COPY (SELECT 1) TO PROGRAM 'touch {touched}'"
    verdict = teaching.check_stuck_query(copy, db, fixture)
    assert verdict.ok is False and "PostgreSQL refused it" in verdict.message
    assert not touched.exists()
    read = teaching.check_stuck_query("SELECT pg_read_file('/etc/passwd')", db, fixture)
    assert read.ok is False and "PostgreSQL refused it" in read.message
    assert "root:" not in read.message
    other = sim.make_backend("postgres", dsn=db.dsn)  # another schema on the server: not readable
    try:
        outside = teaching.check_stuck_query(
            f"SELECT id FROM {other.schema}.payment_jobs", db, fixture
        )
    finally:
        other.close()
    assert outside.ok is False and "PostgreSQL refused it" in outside.message
    stdout = teaching.check_stuck_query("COPY (SELECT 1) TO STDOUT", db, fixture)
    assert stdout.ok is False and "the Python driver" in stdout.message  # the session it broke
    assert len(roles) == 4 and _gone(db, roles)  # ... is ended, the role dropped all the same


@pytest.mark.postgres
def test_advisory_locks_are_released_after_the_check(exercise, roles):
    db, fixture = exercise
    key = 4242 + os.getpid()  # this process's own key: other tests may share the server
    answer = f"SELECT pg_advisory_lock({key})"
    verdict = teaching.check_stuck_query(answer, db, fixture)
    assert verdict.ok is False and "first column must be the job id" in verdict.message
    held = "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objid = %(k)s"
    assert int(teaching.sql_frame(db, held, {"k": key}).iloc[0, 0]) == 0
    # a right answer that takes a lock on each state: both roles and both locks are gone after
    roles.clear()
    locked = f"{RIGHT} AND pg_try_advisory_lock({key})"
    assert teaching.check_stuck_query(locked, db, fixture).ok is True
    assert len(roles) == 2 and _gone(db, roles)
    assert int(teaching.sql_frame(db, held, {"k": key}).iloc[0, 0]) == 0


@pytest.mark.postgres
def test_each_check_draws_a_new_hidden_state(exercise, monkeypatch):
    db, fixture = exercise
    drawn = []
    draw = sql_exercise.hidden_state

    def recording(hidden_db, rng):
        state = draw(hidden_db, rng)
        drawn.append((state["now"], tuple(state["stuck"])))
        return state

    monkeypatch.setattr(sql_exercise, "hidden_state", recording)
    for _ in range(2):
        assert teaching.check_stuck_query(RIGHT, db, fixture).ok is True
    assert len(drawn) == 2 and drawn[0] != drawn[1]
