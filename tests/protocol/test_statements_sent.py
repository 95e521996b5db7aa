"""What sim.protocol.statements says a policy's steps may send is what runs send on the memory
backend: for every claim strategy, completion mode, rescue mode and heartbeat on and off, a
scripted run that takes every path (a crash leaves a stuck job, every event comes twice with
another payload) sends exactly the statements the derivation lists, and no other; among them the
worker's writes (the review's fencing probes) and the watcher's path (the probes' watcher) are
those the derivation names for its settings."""

from __future__ import annotations

import pytest

from sim.db.memory import MemoryBackend
from sim.db.queue.contracts import CONTRACTS, statements_called
from sim.model.world import build, run_to_horizon
from sim.protocol import statements_sent
from sim.protocol.statements import statement_settings, watcher_path, worker_writes
from sim.scenario.settings import Faults, ScriptedCrash
from tests.model.scripts import scripted

CLAIMS = ["skip_locked", "select_for_update", "conditional_update", "read_then_write"]
COMPLETIONS = {
    "fenced": {},
    "unfenced": {"fencing": False},
    "background": {"completion": "background"},
    "dedup": {"dedup": True},
}
RESCUES = {
    "none": {},
    "requeue": {"watcher": True},
    "gap": {"watcher": True, "watcher_gap": 1.0},
    "two_phase": {"watcher": True, "stall_check": "two_phase"},
    "process": {"watcher": True, "process_heartbeat_interval": 5.0},
    "job": {"watcher": True, "rescue": "job"},
}
NOT_THE_PROTOCOL = {"insert_job", "commit", "rollback"}  # the producer's, transaction control


def sent(scenario) -> set[str]:
    """The named statements a run of `scenario` sent on the memory backend."""
    world = build(scenario, MemoryBackend())
    run_to_horizon(world, progress=False)
    return set(world.statement_counts) - NOT_THE_PROTOCOL


def every_path(faults=None, **policy):
    """One worker, three 25 s jobs, each event delivered again with another payload; the worker
    crashes holding its first job at 5 s, and its lease expires for the watcher to find (a claim
    takes no expired lease)."""
    crash = Faults(crashes=(ScriptedCrash(at=5.0, worker=0),))
    return scripted(
        jobs=3,
        horizon=200.0,
        claim_takes_expired=False,
        faults=faults or crash,
        workload={"duplicate_delivery": 1.0, "payload_mismatch": 1.0},
        **policy,
    )


@pytest.mark.parametrize("heartbeat", [True, False])
@pytest.mark.parametrize("rescue", list(RESCUES))
@pytest.mark.parametrize("completion", list(COMPLETIONS))
@pytest.mark.parametrize("claim", CLAIMS)
def test_what_the_derivation_lists_is_what_a_run_sends(claim, completion, rescue, heartbeat):
    scenario = every_path(
        claim=claim, heartbeat=heartbeat, **COMPLETIONS[completion], **RESCUES[rescue]
    )
    ran = sent(scenario)
    assert set(statement_settings(scenario)) == ran
    assert set(worker_writes(scenario, any_setting=True)) & ran == set(worker_writes(scenario))
    ticks = {name for r in RESCUES.values() for name in watcher_path(every_path(**r).policy)}
    tick = set(watcher_path(scenario.policy)) if scenario.policy.watcher else set()
    assert ticks & ran == tick


@pytest.mark.parametrize(
    ("settings", "step", "statement"),
    [
        ({"claim": "skip_locked", "prefetch": 2}, "claim", "claim_batch"),
        (
            {"deadline": 5.0, "deadline_action": "complete", "heartbeat": False},
            "deadline",
            "fail_job_fenced",
        ),
        (
            {"faults": Faults(crashes=(ScriptedCrash(at=5.0, worker=0),), shutdown="graceful")},
            "release",
            "release_job_fenced",
        ),
    ],
)
def test_prefetch_deadline_and_graceful_release_are_derived_too(settings, step, statement):
    scenario = every_path(**settings)
    assert statement in statements_sent(scenario)[step]
    assert set(statement_settings(scenario)) == sent(scenario)


def test_the_queue_contracts_read_the_job_table_statements_from_the_derivation():
    scenario = every_path(claim="select_for_update", dedup=True, watcher=True, watcher_gap=1.0)
    called = statements_called(scenario)
    assert called == {
        "insert_job": "every run",
        "dump_jobs": "every run",
        "lock_next_candidate": "policy.claim = select_for_update",
        "claim_unconditional": "policy.claim = select_for_update",
        "heartbeat": "policy.heartbeat = true",
        "complete_fenced": "policy.fencing = true",
        "reject_job_fenced": "policy.dedup = true",
        "select_stuck_jobs": "policy.watcher_gap > 0",
        "rescue_job": "policy.watcher_gap > 0",
    }
    protocol_only = set(statement_settings(scenario)) - set(called)
    assert protocol_only == {"insert_dedup_marker", "read_dedup_marker", "insert_ledger_entry"}
    assert not protocol_only & set(CONTRACTS)  # the lab's own tables, not the queue's


def test_every_write_by_a_worker_is_sent_under_some_setting():
    """What the fencing probes may probe (a queue's own write that other settings send) is what
    runs with those settings send: fenced and unfenced completion, heartbeat, a payload conflict's
    rejection, a deadline's failure, a graceful release; in that order, the completion first."""
    graceful = Faults(crashes=(ScriptedCrash(at=5.0, worker=0),), shutdown="graceful")
    deadline = {"deadline": 5.0, "deadline_action": "complete", "heartbeat": False}
    runs = [
        every_path(dedup=True, faults=graceful),
        every_path(fencing=False),
        every_path(**deadline),
    ]
    writes = worker_writes(runs[0], any_setting=True)
    assert list(writes) == [
        "complete_fenced",
        "complete_unfenced",
        "heartbeat",
        "reject_job_fenced",
        "fail_job_fenced",
        "release_job_fenced",
    ]
    assert set(writes) == set().union(*(sent(s) for s in runs)) & set(writes)
    assert [set(worker_writes(s)) for s in runs] == [set(writes) & sent(s) for s in runs]
    assert worker_writes(runs[2]) == {
        "complete_fenced": "policy.fencing = true",
        "fail_job_fenced": "policy.deadline > 0",
    }
