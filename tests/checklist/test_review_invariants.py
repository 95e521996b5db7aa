"""The review reports every invariant a run can break, as FAIL with its count, and charges each
to the mechanism whose write broke it: a rescue that overwrites a finished job fails item 4, on
the simulated database and on a queue's own SQL; the same rescue written to re-check the job
passes it."""

from __future__ import annotations

from pathlib import Path

import pytest

import sim
from sim.checklist.design_review import FAIL, PASS, review

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "queues"
GAP = {"policy.watcher_gap": 2.0}


def violations(runs, invariant: str) -> int:
    return sum(r.check().counts().get(invariant, 0) for r in runs)


def test_a_finished_job_overwritten_fails_the_review_with_its_count():
    """`run no-heartbeat-long-jobs --set policy.watcher_gap=2` reports terminal_overwritten twice
    (seed 1): the review of the same scenario fails item 4 and the invariants item with that
    count."""
    run = sim.run("no-heartbeat-long-jobs", **GAP)
    assert run.check().counts()["terminal_overwritten"] == 2
    r = review("no-heartbeat-long-jobs", seeds=(1,), variants=False, **GAP)
    assert r.table.loc["watcher", "status"] == FAIL
    assert r.measured["watcher"]["watcher_overwrites"] == 2
    assert (
        "its write overwrote 2 finished jobs (terminal_overwritten"
        in r.table.loc["watcher", "evidence"]
    )
    row = r.table.loc["invariants"]
    assert row["status"] == FAIL and r.measured["invariants"]["terminal_overwritten"] == 2
    assert row["evidence"].startswith("2 of 9 invariants broken in 1 run: ")
    assert (
        "terminal_overwritten 2: 2 in the scenario's runs; e.g. job 52 in the scenario's run of "
        "seed 1: w0 made it Completed at "
        "708.306s; watcher made it Pending at 708.742s"
    ) in row["evidence"]
    for name, n in run.check().counts().items():
        assert r.measured["invariants"][name] == n


def test_every_invariant_broken_in_any_run_is_counted():
    """... and each example names the run it comes from: the scenario's or a variant's, and its
    seed (issue 31 item 4: examples from different seeds, unnamed)."""
    r = review("read-then-write-race", seeds=(1, 2))
    counted = {}
    for runs in [r.runs, *r.variants.values()]:
        for run in runs:
            for name, n in run.check().counts().items():
                counted[name] = counted.get(name, 0) + n
    assert (
        counted
        and {k: v for k, v in r.measured["invariants"].items() if v and k != "runs"} == counted
    )
    assert r.table.loc["invariants", "status"] == FAIL
    evidence = r.table.loc["invariants", "evidence"]
    for part in evidence.split("; e.g. ")[1:]:
        run_of = part.split(": ", 1)[0]
        assert " of seed 1" in run_of or " of seed 2" in run_of, run_of
        assert "in the scenario's run" in run_of or "variant's run" in run_of, run_of


def test_no_violation_passes_the_invariants_item():
    r = review("baseline", seeds=(1,), variants=False)
    assert r.runs[0].check().counts() == {}
    assert r.table.loc["invariants", "status"] == PASS
    assert r.table.loc["invariants", "evidence"] == (
        "all 9 invariants held in 1 run (the scenario's and its variants')."
    )


def test_a_double_claim_after_a_rescue_is_the_watchers_not_the_claims():
    """With the buggy rescue a job taken again in the gap is put back to Pending while its new
    lease runs, and a third worker claims it: a double claim, charged to the watcher."""
    r = sim.run("no-heartbeat-long-jobs", seed=2, **{"policy.watcher_gap": 3.0})
    doubles = [v for v in r.check().violations if v.invariant == "double_claim"]
    assert [(v.job, v.by, v.cause) for v in doubles] == [
        (2, "watcher", "watcher"),
        (45, "watcher", "watcher"),
    ]
    assert doubles[0].detail == (
        "w1 claimed it at 148.781s while w0's lease (attempt 4) ran to 174.374s, after watcher "
        "made it Pending at 146.814s"
    )
    rv = review("no-heartbeat-long-jobs", seeds=(2,), variants=False, **{"policy.watcher_gap": 3.0})
    assert rv.measured["claim"]["double_claims"] == 0
    assert rv.measured["claim"]["handed_double_claims"] == 2
    assert rv.measured["watcher"]["watcher_double_claims"] == 2
    assert rv.table.loc["claim", "status"] == PASS and rv.table.loc["watcher", "status"] == FAIL


@pytest.mark.postgres
def test_a_buggy_and_a_fixed_rescue_get_different_verdicts(pg_dsn, tmp_path):
    """The seed queue with Lease Lab's rescue_job (by id alone) and with one that re-checks the
    job as it writes, both read-then-write (queue.toml: watcher_gap = 2): item 4 and the
    invariants item fail on the first, item 4 passes on the second."""
    fixed = tmp_path / "fixed"
    fixed.mkdir()
    rescue = (
        "\n-- name: rescue_job\n-- Requeue the job read as stuck, if it still is.\n"
        "-- params: id int, now time, max_attempts int, retry_backoff int\n"
        "UPDATE payment_jobs j\n"
        "SET status = CASE WHEN j.attempts >= %(max_attempts)s THEN 'Dead' ELSE 'Pending' END,\n"
        "    last_error = 'lease expired',\n"
        "    run_after = %(now)s + (%(retry_backoff)s * j.attempts * j.attempts * j.attempts * "
        "j.attempts) * interval '1 microsecond'\n"
        "WHERE j.id = %(id)s AND j.status = 'Processing' AND j.lease_until < %(now)s\n"
        "RETURNING j.id, j.status, j.lease_owner, j.attempts;\n"
    )
    (fixed / "queries.sql").write_text((EXAMPLES / "seed" / "queries.sql").read_text() + rescue)
    (fixed / "queue.toml").write_text("[policy]\nwatcher_gap = 2.0\n")
    buggy = tmp_path / "buggy"
    buggy.mkdir()
    (buggy / "queries.sql").write_text((EXAMPLES / "seed" / "queries.sql").read_text())
    (buggy / "queue.toml").write_text("[policy]\nwatcher_gap = 2.0\n")
    before = review("no-heartbeat-long-jobs", seeds=(1,), variants=False, sql=buggy, dsn=pg_dsn)
    after = review("no-heartbeat-long-jobs", seeds=(1,), variants=False, sql=fixed, dsn=pg_dsn)
    assert before.table.loc["watcher", "status"] == FAIL
    assert before.measured["watcher"]["watcher_overwrites"] == 2
    assert before.measured["invariants"]["terminal_overwritten"] == 2
    assert after.table.loc["watcher", "status"] == PASS
    assert after.measured["watcher"]["watcher_overwrites"] == 0
    assert after.measured["invariants"]["terminal_overwritten"] == 0
    assert before.findings["watcher"].safe is False and after.findings["watcher"].safe is True
    assert "(PostgreSQL; its queue.toml sets watcher_gap = 2.0)" in after.header()
