"""The time-scale guard on real PostgreSQL (issue 24 item 1): a queue whose claim read is fast on
an empty table and slow on a loaded one (it hashes every row before it sorts) is refused, in one
line naming the measured figures and the smallest sound scale, where the empty table passes, as
the old guard's empty-table probe would have; and a run whose read slows down after it started
is marked unsound, naming the statement. Sized for a loaded machine: the slow read takes about
20 ms on an idle one, twice its 10 ms bound, and only grows with load."""

from __future__ import annotations

import re

import pytest

import sim
from sim.cli.main import main
from sim.live_mode.budget import MAX_SHARE
from sim.live_mode.settings import hand_check
from sim.scenario.settings import save
from tests.cli.test_hardening import one_error_line
from tests.live_mode.test_live_run import _children, _live_backends

# server_wide: they count every live session and stopped server process on the server
pytestmark = [pytest.mark.live, pytest.mark.postgres, pytest.mark.server_wide]

READ = """-- name: select_candidates
-- The read of a claim, {what}
-- params: now time, take_expired bool, max_attempts int, limit int
SELECT id, status, lease_owner, lease_until, attempts
FROM payment_jobs
WHERE attempts < %(max_attempts)s
  AND ((status = 'Pending' AND (run_after IS NULL OR run_after <= %(now)s))
       OR (%(take_expired)s AND status = 'Processing' AND lease_until < %(now)s))
ORDER BY {order}, id
LIMIT %(limit)s;
"""
HASHED = "md5(repeat(payload, 20))"  # every candidate row hashed: slow on a loaded table
SLOW_READ = READ.format(what="slow on a loaded table: it hashes every row.", order=HASHED)
# slow from 1 s of scenario time on (the guard probes at 0 s): 20 ms of sleep per read
SLOWS_DOWN = READ.format(
    what="that sleeps from 1 s of run time on.",
    order="(SELECT pg_sleep(CASE WHEN %(now)s >= timestamptz '2026-01-01 00:00:01+00' "
    "THEN 0.02 ELSE 0 END))::text",
)
QUIET = {"faults.crash_rate": 0.0}  # no kills: only the statements can make the run unsound


def _queue(tmp_path, text: str):
    (tmp_path / "queries.sql").write_text(text)
    return tmp_path


@pytest.mark.timeout(300)
def test_a_read_slow_on_the_loaded_table_is_refused_where_the_empty_table_passes(
    tmp_path, pg_dsn, capsys
):
    (tmp_path / "q").mkdir()
    queue = _queue(tmp_path / "q", SLOW_READ)
    toml = save(hand_check(**QUIET), tmp_path / "check.toml")  # 5000 jobs loaded at t = 0
    argv = ["live", str(toml), "--duration", "3", "--dsn", pg_dsn, "--sql", str(queue)]
    assert main(argv) == 2
    line = one_error_line(capsys)
    found = re.fullmatch(
        r"error: --time-scale 1: on the loaded table \(5000 jobs, 5 clients at once\) "
        r"select_candidates takes ([\d.]+) ms \(median of \d+\), [\d.]+ ms of scenario time, "
        r"([\d.]+)% of policy.poll_interval 0.2 s \(over the bound of 5%\): "
        r"use --time-scale >= ([\d.]+)",
        line,
    )
    assert found, line
    latency, share, least = (float(g) for g in found.groups())
    assert latency > 10 and share > 100 * MAX_SHARE and least > 1.0
    assert least >= latency / 1000 / (MAX_SHARE * 0.2) - 0.05  # the read's own bound
    assert _children() == [] and _live_backends(pg_dsn) == 0

    # the same queue and scale with 10 jobs (as empty as the old guard's table): accepted
    small = sim.live(
        hand_check(**QUIET, **{"workload.jobs": 10}), duration=2.0, dsn=pg_dsn, sql=queue
    )
    read = small.guard.statements["select_candidates"]
    assert read < MAX_SHARE * 0.2 < latency / 1000 and small.guard.jobs == 10
    assert small.guard.smallest_scale <= 1.0


@pytest.mark.timeout(300)
def test_a_read_that_slows_during_the_run_marks_it_unsound(tmp_path, pg_dsn):
    queue = _queue(tmp_path, SLOWS_DOWN)
    scenario = hand_check(**QUIET, **{"workload.processing": {"kind": "exponential", "mean": 0.2}})
    r = sim.live(scenario, duration=6.0, dsn=pg_dsn, sql=queue)
    assert r.guard.statements["select_candidates"] < 0.010  # it passed the guard
    assert not r.sound
    [reason] = [u for u in r.unsound if u.startswith("statement latency: select_candidates")]
    assert re.fullmatch(
        r"statement latency: select_candidates took [\d.]+ ms \(median of \d+\) from 0 s to 6 s, "
        r"[\d.]+ ms of scenario time, over the bound of 10 ms \(5% of policy.poll_interval 0.2 s\)",
        reason,
    ), reason
    assert f"the live run is unsound: {reason}" in str(sim.compare(r, 1, sql=queue, dsn=pg_dsn))
