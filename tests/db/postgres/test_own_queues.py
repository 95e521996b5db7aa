"""The example queues of examples/queues/, each reviewed on a real PostgreSQL: what the SQL text
shows, what the runs measure and which invariants break (fixed seeds, exact counts)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import sim
from sim.checklist.design_review import FAIL, PASS, RISK, UNTESTED
from sim.cli.run_text import format_summary

pytestmark = pytest.mark.postgres

ROOT = Path(__file__).resolve().parents[3]
QUEUES = ROOT / "examples" / "queues"
RACE = {
    "policy.claim": "conditional_update",
    "workload.jobs": 60,
}  # select_candidates, then claim_conditional


def review(name: str, scenario: str, dsn: str, seeds=(1, 2, 3), **overrides):
    return sim.review(scenario, sql=QUEUES / name, dsn=dsn, seeds=seeds, **overrides)


def statuses(r) -> dict[str, str]:
    return {key: r.table.loc[key, "status"] for key in ("claim", "fencing", "watcher")}


def test_seed_is_clean_and_runs_exactly_like_the_project(pg_dsn):
    r = review("seed", "gc-pause-zombie", pg_dsn)
    assert statuses(r) == {"claim": PASS, "fencing": PASS, "watcher": PASS}
    assert all(f.safe for f in r.findings.values())
    assert r.table.loc["fencing", "evidence"].startswith(
        f"SQL, asked of the server: complete_fenced ({QUEUES / 'seed'}/queries.sql:27) checks "
        "owner and attempt, refuses a late write once the watcher took the job back, and leaves a "
        f"finished job alone; heartbeat ({QUEUES / 'seed'}/queries.sql:19) checks owner and attempt"
    )
    assert r.table.loc["fencing", "evidence"].endswith(
        "the runs confirm it. Runs: complete_fenced: 3 late completions refused, 0 completions by "
        "a non-owner."
    )
    assert r.measured["claim"]["variant_double_claims"] == 0
    assert [run.check().counts() for run in r.runs] == [{"duplicate_external_effect": 1}] * 3
    own = sim.run("gc-pause-zombie", sql=QUEUES / "seed", dsn=pg_dsn)
    simulated = sim.run("gc-pause-zombie")
    assert own.queue == str(QUEUES / "seed") and own.backend == "postgres"
    assert [(round(t, 6), *rest) for t, *rest in own.log] == [
        (round(t, 6), *rest) for t, *rest in simulated.log
    ]


def test_read_then_write_double_claims(pg_dsn):
    r = review("read-then-write", "read-then-write-race", pg_dsn, seeds=(1,), **RACE)
    assert statuses(r)["claim"] == FAIL
    finding = r.findings["claim"]
    assert not finding.safe
    assert finding.text.startswith(
        f"select_candidates (Lease Lab's sql/queries.sql), then claim_conditional "
        f"({QUEUES / 'read-then-write'}/queries.sql:9), whose write took a job another worker "
        "held when run alone"
    )
    assert (
        "Decided by the server probe, and the runs' double claims."
        in r.table.loc["claim", "evidence"]
    )
    claim = r.measured["claim"]
    assert (
        claim["double_claims"],
        claim["leases"],
        claim["variant_double_claims"],
        claim["variant_leases"],
    ) == (4, 64, 10, 210)
    assert r.runs[0].check().counts() == {
        "double_claim": 4,
        "non_owner_completion": 4,
        "duplicate_db_effect": 4,
        "duplicate_external_effect": 4,
    }
    seed = sim.run("read-then-write-race", sql=QUEUES / "seed", dsn=pg_dsn, **RACE)
    assert seed.summary["double_claims"] == 0 and seed.check().counts() == {}


def test_unfenced_completion_lets_the_zombie_complete(pg_dsn):
    r = review("unfenced-completion", "gc-pause-zombie", pg_dsn)
    assert statuses(r) == {"claim": PASS, "fencing": FAIL, "watcher": PASS}
    assert r.findings["fencing"].text.startswith(
        f"complete_fenced ({QUEUES / 'unfenced-completion'}/queries.sql:7) checks neither owner "
        "nor attempt"
    )
    assert (
        r.measured["fencing"]["refused_completions"],
        r.measured["fencing"]["non_owner_completions"],
    ) == (0, 3)
    first = r.runs[0].check()
    assert first.counts() == {"non_owner_completion": 1, "duplicate_external_effect": 1}
    assert [v.invariant for v in first.unexpected] == ["non_owner_completion"]


def example(name: str) -> str:
    return str(QUEUES / name / "scenario.toml")


def test_river_like_runs_long_jobs_twice_and_commits_the_late_completion(pg_dsn):
    """River before PR #1373: no heartbeat, a rescue by read-then-write by id alone, and
    JobCompleteTx, which returns the job's row whatever its state: the worker whose job was
    rescued and finished by another commits its ledger row all the same."""
    r = review("river-like", example("river-like"), pg_dsn)
    assert statuses(r) == {"claim": PASS, "fencing": FAIL, "watcher": RISK}
    assert r.table.loc["heartbeat", "status"] == FAIL and r.table.loc["ttl", "status"] == FAIL
    assert r.findings["watcher"].safe is False  # the probes show the rescue's blind write...
    assert r.measured["watcher"]["watcher_overwrites"] == 0  # ...the runs did not hit it
    assert (
        "returns a finished job's row to a late write (nothing written: the worker takes it as "
        "done and commits)" in r.findings["fencing"].text
    )
    ttl = r.measured["ttl"]
    assert (ttl["false_expiries"], ttl["double_processed_jobs"], ttl["jobs"]) == (53, 20, 71)
    assert r.measured["fencing"]["non_owner_completions"] == 7
    assert [run.check().counts() for run in r.runs] == [
        {"non_owner_completion": 4, "duplicate_db_effect": 6, "duplicate_external_effect": 6},
        {"non_owner_completion": 1, "duplicate_db_effect": 3, "duplicate_external_effect": 4},
        {"non_owner_completion": 2, "duplicate_db_effect": 10, "duplicate_external_effect": 10},
    ]
    assert all(run.check().ok for run in r.runs)  # the scenario expects what it shows


def test_graphile_like_deletes_finished_jobs_and_never_fences_completion(pg_dsn):
    """graphile-worker 0.16+: the claim never takes a locked job, the periodic reset frees stale
    locks (the watcher), and completion deletes the job by its id alone, so the zombie's late
    completion deletes the job another worker holds. Deleted jobs cannot show their owner or
    attempts: those items are untested, and say why."""
    r = review("graphile-like", example("graphile-like"), pg_dsn)
    assert statuses(r) == {"claim": PASS, "fencing": FAIL, "watcher": PASS}
    assert r.findings["fencing"].text.startswith(
        f"complete_unfenced ({QUEUES / 'graphile-like'}/queries.sql:33) checks neither owner nor "
        "attempt"
    )
    assert r.measured["watcher"]["moved_by_watcher"] == 3
    assert r.measured["fencing"]["non_owner_completions"] == 3
    assert r.measured["owner"]["deleted_jobs"] == 9
    assert r.table.loc["owner", "status"] == UNTESTED == r.table.loc["attempts", "status"]
    assert (
        "(9 finished jobs deleted from the table by the queue, not judged)"
        in r.table.loc["owner", "evidence"]
    )
    # completeJobs runs after the task, outside its transaction: the refused completion of the
    # worker whose job was deleted under it undoes nothing, so its ledger row stays too
    assert r.measured["fencing"]["effects_of_refused_completions"] == 3
    assert [run.check().counts() for run in r.runs] == [
        {"non_owner_completion": 1, "duplicate_db_effect": 1, "duplicate_external_effect": 1}
    ] * 3
    assert all(run.table_jobs.empty for run in r.runs)


def test_solid_queue_like_refuses_the_finish_of_a_pruned_job(pg_dsn):
    """Solid Queue 1.5 (#589, #761): the prune fails the job of a process whose heartbeat went
    stale during a hang; the worker's late finish is refused. Its claim is data-changing steps
    judged by contention; it has no attempts column, so item 6 is untested."""
    r = review("solid-queue-like", example("solid-queue-like"), pg_dsn)
    assert statuses(r) == {"claim": PASS, "fencing": RISK, "watcher": RISK}
    assert r.table.loc["fencing", "evidence"].endswith(
        "completion in the background (policy.completion): a refused completion undoes nothing, "
        "and the effect of 3 refused completions had committed before: the fence guards the "
        "job's row, not the effect."
    )
    assert r.table.loc["attempts", "status"] == UNTESTED
    assert r.table.loc["attempts", "evidence"].startswith(
        "the queue keeps no attempts count (dump_jobs returns NULL attempts, its claims too)"
    )
    assert (
        "Decided by the runs under contention: 0 double claims in 72 leases (8+ workers on 200 "
        "jobs at once), 0 double claims in the scenario's 12 leases."
    ) in r.table.loc["claim", "evidence"]
    assert (
        r.measured["fencing"]["refused_completions"],
        r.measured["watcher"]["watcher_dead"],
    ) == (3, 3)
    assert [run.check().counts() for run in r.runs] == [{}] * 3
    first = r.runs[0]
    moves = first.events[first.events["kind"].isin(["requeue", "complete_rejected"])]
    assert [
        (k, w, j, d)
        for k, w, j, d in moves[["kind", "worker", "job", "detail"]].itertuples(index=False)
    ][:2] == [
        ("requeue", "watcher", 2, "Dead"),
        ("complete_rejected", "w0", 2, pytest.approx(36.848516)),
    ]


def test_pg_boss_like_has_uuid_ids_no_owner_and_fails_jobs_by_id(pg_dsn):
    """pg-boss 12: uuid ids the queue makes up (mapped to the model's jobs), no owner column (item
    5 fails: pg-boss keeps none), expiry and retry by DELETE + INSERT of the row (the server counts
    its writes), and work()'s deadline at expireInSeconds, which fails the job by its id alone
    while the handler runs on: the retry runs in parallel, both handlers charge the card and
    commit their own ledger row, and the late handler's result is dropped (deadline_action =
    drop: pg-boss calls complete() only for a handler that beat the deadline), so the scenario's
    runs complete no job by a non-owner (issue 31 item 1: they used to, 23 times)."""
    r = review("pg-boss-like", example("pg-boss-like"), pg_dsn)
    assert statuses(r) == {"claim": PASS, "fencing": FAIL, "watcher": PASS}
    assert r.table.loc["owner", "status"] == FAIL and r.measured["owner"]["owner_mismatches"] == 72
    assert r.findings["watcher"].numbers["written"] == 2
    assert (
        "73 given back by their owner (failed at its deadline, or released)"
        in r.table.loc["watcher", "evidence"]
    )
    assert r.findings["fencing"].numbers["fail_job_fenced"]["other"] == "written"
    counts = [run.check().counts() for run in r.runs]
    assert counts == [
        {"duplicate_db_effect": 6, "duplicate_external_effect": 6},
        {"duplicate_db_effect": 6, "duplicate_external_effect": 7},
        {"duplicate_db_effect": 11, "duplicate_external_effect": 12},
    ]
    assert all(run.check().ok for run in r.runs)  # what the scenario expects, nothing else
    late = sum(int((run.events["kind"] == "late_result").sum()) for run in r.runs)
    assert late == 68 and all((run.events["kind"] != "complete_rejected").all() for run in r.runs)
    # the work a dropped result did is measured (item 3): 35% of jobs outlive the 30 s deadline
    ttl = r.measured["ttl"]
    assert (ttl["finished_jobs"], ttl["cut_off_jobs"]) == (71, 1)
    assert ttl["over_ttl_share"] == pytest.approx(25 / 72, abs=0.01)
    assert (
        "35% of jobs outlived the TTL; 73 of 121 leases expired" in r.table.loc["ttl", "evidence"]
    )
    assert all(sorted(run.table_jobs["id"]) == list(range(1, 25)) for run in r.runs)
    summary = format_summary(r.runs[0]).splitlines()[1]
    assert summary.startswith("  queue.toml settings applied: claim = skip_locked, ")
    assert "deadline = 30.0, deadline_action = drop, fencing = false" in summary


def test_sweep_over_a_queue(pg_dsn):
    s = sim.sweep(
        "gc-pause-zombie",
        {"policy.lease_ttl": [15, 60]},
        sql=QUEUES / "unfenced-completion",
        dsn=pg_dsn,
        executor="serial",
    )
    assert s.runs["false_expiries"].tolist() == [1, 0]
    assert s.runs["duplicate_external_effects"].tolist() == [1, 0]


def test_cli_review_with_sql_and_a_bad_definition(pg_dsn, tmp_path):
    env = {"LEASELAB_DSN": pg_dsn, "PATH": "/usr/bin:/bin"}
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "sim",
            "review",
            "gc-pause-zombie",
            "--seeds",
            "1",
            "--no-variants",
            "--sql",
            str(QUEUES / "unfenced-completion"),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
    )
    assert out.returncode == 0, out.stderr
    assert "[FAIL] Completion is fenced by owner + attempt" in out.stdout
    assert "SQL, asked of the server: complete_fenced (" in out.stdout
    bad = tmp_path / "q"
    bad.mkdir()
    (bad / "queries.sql").write_text(
        "-- name: heartbeat\n-- x\n-- params: id int\nUPDATE payment_jobs SET x = 1 "
        "WHERE id = %(id)s RETURNING id, lease_until;\n"
    )
    out = subprocess.run(
        [sys.executable, "-m", "sim", "run", "baseline", "--sql", str(bad)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
    )
    assert out.returncode == 2
    assert out.stderr == (
        f"error: {bad}/queries.sql:4: heartbeat: PostgreSQL cannot PREPARE it against Lease Lab's "
        'job table (sql/schema.sql): column "x" of relation "payment_jobs" does not exist\n'
    )


def test_the_notebook_exercise_judges_a_fenced_completion(pg_dsn):
    from sim import teaching

    base = "UPDATE payment_jobs SET status = 'Completed', completed_at = %(now)s WHERE id = %(id)s"
    right = teaching.check_fenced_completion(
        f"{base} AND lease_owner = %(owner)s AND attempts = %(attempt)s RETURNING id", dsn=pg_dsn
    )
    assert right.ok is True and right.message.startswith(
        "No completion by a worker that had lost the job went through in this run (1 refused)"
    )
    unfenced = teaching.check_fenced_completion(f"{base} RETURNING id", dsn=pg_dsn)
    assert (
        unfenced.ok is False
        and "(1 completion by a worker that had lost the job)" in unfenced.message
    )
    owner_only = teaching.check_fenced_completion(
        f"{base} AND lease_owner = %(owner)s RETURNING id", dsn=pg_dsn
    )
    assert owner_only.ok is False and owner_only.message.endswith("Check the attempt too.")
    refused = teaching.check_fenced_completion(f"{base} AND lease_owner = %(owner)s", dsn=pg_dsn)
    assert refused.ok is False and refused.message.startswith(
        "Lease Lab refused the definition: queries.sql:4: complete_fenced: returns 0 column(s)"
    )
    assert teaching.check_fenced_completion(None).ok is None
