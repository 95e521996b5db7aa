"""Live mode runs a queue's SQL in the sandbox too (sim.db.queue.sandbox): a statement past the time
limit stops the run in one line naming it and the limit, even one whose session turned the
server's timeout off, and leaves no child process and no server process behind."""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest

from sim.cli.main import main
from sim.live_mode import probe
from sim.scenario.limits import STATEMENT_TIMEOUT_ENV
from tests.cli.test_hardening import one_error_line

# server_wide: they count every live session and stopped server process on the server
pytestmark = [pytest.mark.live, pytest.mark.postgres, pytest.mark.server_wide]

SLEEPY_HEARTBEAT = (
    "-- name: heartbeat\n-- renew, slowly\n"
    "-- params: id int, owner text, attempt int, lease_until time\n"
    "UPDATE payment_jobs SET lease_until = %(lease_until)s WHERE id = %(id)s "
    "AND lease_owner = %(owner)s AND attempts = %(attempt)s AND pg_sleep(1000000) IS NOT NULL "
    "RETURNING id, lease_until\n"
)
TIMEOUT_OFF_THEN_SLEEP_ALWAYS = (
    "-- name: select_candidates\n-- read, and turn the session's time limit off\n"
    "-- params: now time, take_expired bool, max_attempts int, limit int\n"
    "SELECT id FROM payment_jobs, set_config('statement_timeout', '0', false) AS off "
    "WHERE status = 'Pending' AND attempts < %(max_attempts)s "
    "AND (%(take_expired)s OR %(now)s IS NOT NULL) ORDER BY id LIMIT %(limit)s\n\n"
    "-- name: claim_conditional\n-- claim, after sleeping for ever\n"
    "-- params: id int, owner text, now time, lease_until time, max_attempts int\n"
    "UPDATE payment_jobs SET status = 'Processing', lease_owner = %(owner)s, "
    "lease_until = %(lease_until)s, attempts = attempts + 1 WHERE id = %(id)s "
    "AND attempts < %(max_attempts)s AND (status = 'Pending' OR lease_until < %(now)s) "
    "AND pg_sleep(1000000) IS NOT NULL RETURNING id, attempts\n"
)

# ... the claim sleeps only once another job's claim committed: not in the time-scale guard's
# probe (its cycles roll back), so the run starts and its watch of statements ends it
TIMEOUT_OFF_THEN_SLEEP = TIMEOUT_OFF_THEN_SLEEP_ALWAYS.replace(
    "pg_sleep(1000000) IS NOT NULL",
    "(SELECT pg_sleep(CASE WHEN EXISTS (SELECT FROM payment_jobs WHERE status = 'Processing') "
    "THEN 1000000 ELSE 0 END)) IS NOT NULL",
)


def _leftover_backends(pg_dsn) -> list:
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        return conn.execute(
            "SELECT pid, usename, application_name FROM pg_stat_activity "
            "WHERE application_name LIKE 'leaselab-live:%' OR usename LIKE 'leaselab%'"
        ).fetchall()


@pytest.mark.timeout(240)
@pytest.mark.parametrize(
    ("queries", "says"),
    [
        (
            SLEEPY_HEARTBEAT,
            "queries.sql:4: heartbeat: cancelled by PostgreSQL (canceling statement due to "
            "statement timeout) at the statement time limit of 1 s (set "
            "LEASELAB_STATEMENT_TIMEOUT)",
        ),
        (
            TIMEOUT_OFF_THEN_SLEEP,
            "a statement ran past the statement time limit of 1 s (set LEASELAB_STATEMENT_TIMEOUT) "
            "and was ended: UPDATE payment_jobs",
        ),
    ],
    ids=["server timeout", "timeout turned off"],
)
def test_a_live_statement_past_the_limit_stops_the_run_in_one_line(
    monkeypatch, tmp_path, capsys, pg_dsn, queries, says
):
    from tests.live_mode.test_live_run import _children

    monkeypatch.setenv(STATEMENT_TIMEOUT_ENV, "1")
    # the probe's clients never finish their cycles here: cut its wait short (its own cap: 30 s)
    monkeypatch.setattr(probe, "MAX_SECONDS", 6.0)
    (tmp_path / "queries.sql").write_text(queries)
    argv = ["live", "crash-recovery", "--duration", "20", "--time-scale", "0.1", "--dsn", pg_dsn]
    assert main([*argv, "--sql", str(tmp_path), "--set", "faults.crash_rate=0"]) == 2
    line = one_error_line(capsys)
    assert says in line, line
    assert _children() == [] and _leftover_backends(pg_dsn) == []
    assert Path(tmp_path).exists()  # the user's queue directory is untouched


HANGING_CLAIM = TIMEOUT_OFF_THEN_SLEEP_ALWAYS.replace(
    "FROM payment_jobs, set_config('statement_timeout', '0', false) AS off", "FROM payment_jobs"
).replace("pg_sleep(1000000) IS NOT NULL", "(SELECT pg_sleep(20)) IS NOT NULL")
# ... only once a claim has committed: the guard's probe cycles (rolled back) never see one
HANGING_LATER = HANGING_CLAIM.replace(
    "(SELECT pg_sleep(20))",
    "(SELECT pg_sleep(CASE WHEN EXISTS (SELECT FROM payment_jobs "
    "WHERE status IN ('Processing', 'Completed')) "
    "THEN 20 ELSE 0 END))",
)


@pytest.mark.timeout(240)
def test_a_live_run_ending_with_statements_in_flight_is_inconclusive(
    monkeypatch, tmp_path, capsys, pg_dsn
):
    """Issue 35 item 9: a run shorter than the statement limit, whose claim hangs, does not say
    'all hold': it is inconclusive, says which statements were still running, and exits 1."""
    from tests.live_mode.test_live_run import _children

    monkeypatch.setenv(STATEMENT_TIMEOUT_ENV, "30")
    (tmp_path / "queries.sql").write_text(HANGING_LATER)
    argv = ["live", "crash-recovery", "--duration", "4", "--time-scale", "0.1", "--dsn", pg_dsn]
    assert main([*argv, "--sql", str(tmp_path), "--set", "faults.crash_rate=0"]) == 1
    out = capsys.readouterr().out
    assert "inconclusive: w" in out and "was still running at the end" in out, out
    assert "the live run is inconclusive" in out
    assert _children() == [] and _leftover_backends(pg_dsn) == []


@pytest.mark.timeout(240)
def test_the_time_scale_guard_times_a_claim_that_hangs(monkeypatch, tmp_path, capsys, pg_dsn):
    """Issue 35 item 9: the guard plays the claim on the loaded table; a claim that hangs is timed
    as far as it got (not left out because it never finished) and the scale is refused."""
    from tests.live_mode.test_live_run import _children

    monkeypatch.setenv(STATEMENT_TIMEOUT_ENV, "30")
    monkeypatch.setattr(probe, "MAX_SECONDS", 8.0)  # the hanging claims would hold it to its 30 s
    (tmp_path / "queries.sql").write_text(HANGING_CLAIM.replace("pg_sleep(20)", "pg_sleep(3)"))
    argv = ["live", "crash-recovery", "--duration", "60", "--time-scale", "0.1", "--dsn", pg_dsn]
    assert main([*argv, "--sql", str(tmp_path), "--set", "faults.crash_rate=0"]) == 2
    line = one_error_line(capsys)
    assert "claim_conditional" in line and "--time-scale" in line, line
    assert "statement time limit" not in line  # the guard's verdict, from its own figures
    assert _children() == [] and _leftover_backends(pg_dsn) == []
