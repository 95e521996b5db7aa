"""policy.completion = background: the handler's effect commits on its own and the completion
follows it, outside its transaction (the background completers of River, pg-boss,
graphile-worker and Oban). A refused completion then undoes nothing: the zombie's ledger row
stays, where in one transaction it rolled back."""

from __future__ import annotations

import pytest

import sim
from sim.errors import ConfigError

from .scripts import paused_zombie, timeline

ZOMBIE = {"policy.dedup": False}  # gc-pause-zombie: w0 paused mid-job 2; w1 takes and finishes it


def records(run, job: int) -> list[tuple]:
    return [
        (round(e.t, 6), e.kind, e.worker, e.attempt)
        for e in run.log
        if e.job == job and e.kind in ("claim", "effect", "complete", "complete_rejected")
    ]


def test_a_refused_completion_in_the_background_keeps_its_effect():
    one = sim.run("gc-pause-zombie", **ZOMBIE)
    background = sim.run("gc-pause-zombie", **ZOMBIE, **{"policy.completion": "background"})
    assert records(one, 2) == [
        (0.848516, "claim", "w0", 1),
        (21.019698, "claim", "w1", 2),
        (41.525698, "effect", "w1", 2),
        (41.525698, "complete", "w1", 2),
        (66.354516, "complete_rejected", "w0", 1),  # effect and completion roll back together
    ]
    assert records(background, 2) == [
        (0.848516, "claim", "w0", 1),
        (21.019698, "claim", "w1", 2),
        (41.523698, "effect", "w1", 2),  # committed first...
        (41.525698, "complete", "w1", 2),  # ...completed one statement later
        (66.352516, "effect", "w0", 1),
        (66.354516, "complete_rejected", "w0", 1),  # refused: the zombie's effect stays
    ]
    assert one.check().counts() == {"duplicate_external_effect": 1}
    assert background.check().counts() == {
        "duplicate_db_effect": 1,
        "duplicate_external_effect": 1,
    }
    assert len(background.table_ledger) == len(one.table_ledger) + 1


def test_the_review_says_the_fence_guards_the_row_not_the_effect():
    r = sim.review(
        "gc-pause-zombie",
        seeds=(1,),
        variants=False,
        **ZOMBIE,
        **{"policy.completion": "background"},
    )
    assert r.table.loc["fencing", "status"] == "risk"
    assert r.measured["fencing"]["effects_of_refused_completions"] == 1
    assert r.table.loc["fencing", "evidence"].endswith(
        "completion in the background (policy.completion): a refused completion undoes nothing, "
        "and the effect of 1 refused completion had committed before: the fence guards the job's "
        "row, not the effect."
    )
    assert r.measured["invariants"]["duplicate_db_effect"] == 1


def test_a_completion_mode_that_does_not_exist_is_one_line():
    with pytest.raises(
        ConfigError, match=r"^policy.completion: must be one of transaction, background$"
    ):
        sim.run("baseline", **{"policy.completion": "later"})


@pytest.mark.postgres
def test_the_background_completion_on_postgres_is_the_simulated_one(pg_dsn):
    settings = {**ZOMBIE, "policy.completion": "background"}
    memory = sim.run("gc-pause-zombie", **settings)
    postgres = sim.run("gc-pause-zombie", "postgres", dsn=pg_dsn, **settings)
    assert [(round(t, 6), *rest) for t, *rest in postgres.log] == [
        (round(t, 6), *rest) for t, *rest in memory.log
    ]
    assert len(postgres.table_ledger) == len(memory.table_ledger)


def test_the_protocols_statements_in_the_background():
    """The steps of a background completion, as every driver plays them: the effect's
    transaction commits, then the completion runs on its own; refused, nothing is rolled back."""
    from sim.protocol import Lease
    from tests.protocol.test_protocol import Fake, worker

    done = Fake(("insert_ledger_entry", [(1,)]), ("complete_fenced", [(2,)]))
    done.play(worker(completion="background").handle(Lease(2, 1, 130.0)))
    refused = Fake(("insert_ledger_entry", [(1,)]), ("complete_fenced", []))
    refused.play(worker(completion="background").handle(Lease(2, 1, 130.0)))
    steps = [step[0] for step in done.trace if step[0] != "record"]
    assert steps[-4:] == ["BEGIN", "insert_ledger_entry", "COMMIT", "complete_fenced"]
    assert done.trace[-1] == ("record", "complete", "w0", 2, 1, 130.0)
    assert refused.trace[-3:] == [
        ("record", "effect", "w0", 2, 1, "evt-2"),
        ("complete_fenced", {"id": 2, "owner": "w0", "attempt": 1, "now": 100.0}),
        ("record", "complete_rejected", "w0", 2, 1, 130.0),
    ]
    assert ("ROLLBACK",) not in refused.trace


def test_the_background_completion_s_timeline():
    """The scripted paused zombie (tests/model/scripts.py) completing in the background: each
    effect commits one statement before its completion, and the zombie's stays when the fence
    refuses its completion (in one transaction both roll back: tests/model/test_timelines.py)."""
    r = sim.run(paused_zombie(completion="background"))
    assert timeline(r) == [
        (0.002, "claim", "w0", 1, 1),
        (0.002, "claim_lost", "w1", 1, None),
        (2.002, "psp_charge", "w0", 1, 1),
        (5.003, "heartbeat", "w0", 1, 1),
        (6.0, "pause_start", "w0", None, None),
        (20.024, "claim", "w1", 1, 2),
        (22.024, "psp_charge", "w1", 1, 2),
        (25.025, "heartbeat", "w1", 1, 2),
        (30.026, "heartbeat", "w1", 1, 2),
        (35.027, "heartbeat", "w1", 1, 2),
        (40.026, "effect", "w1", 1, 2),  # ledger row at 40.025, its commit at 40.026
        (40.027, "complete", "w1", 1, 2),  # the fenced completion on its own
        (51.0, "pause_end", "w0", None, None),
        (51.001, "heartbeat_rejected", "w0", 1, 1),
        (65.004, "effect", "w0", 1, 1),  # the zombie's effect commits...
        (65.005, "complete_rejected", "w0", 1, 1),  # ...and its refused completion undoes nothing
    ]
    assert r.table_ledger[["worker", "attempt"]].values.tolist() == [["w1", 2], ["w0", 1]]
    assert r.table_jobs.loc[0, ["status", "lease_owner", "attempts"]].tolist() == [
        "Completed",
        "w1",
        2,
    ]
    assert r.check().counts() == {"duplicate_db_effect": 1, "duplicate_external_effect": 1}


def test_a_dedup_marker_in_the_background_skips_the_zombie_s_effect():
    r = sim.run(paused_zombie(completion="background", dedup=True))
    assert timeline(r)[-6:] == [
        (40.027, "effect", "w1", 1, 2),  # marker 40.025, ledger row 40.026, commit 40.027
        (40.028, "complete", "w1", 1, 2),
        (51.0, "pause_end", "w0", None, None),
        (51.001, "heartbeat_rejected", "w0", 1, 1),
        (65.005, "dedup_skip", "w0", 1, 1),
        (65.006, "complete_rejected", "w0", 1, 1),
    ]
    assert r.table_ledger["worker"].tolist() == ["w1"]
