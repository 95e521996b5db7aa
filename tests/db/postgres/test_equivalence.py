"""Differential equivalence: whole runs on MemoryBackend and on a real PostgreSQL give IDENTICAL
event logs and final tables, for every preset (scaled down) and for generated scenarios.

PostgreSQL is the reference for SQL semantics; the model drives both backends with the same
statements at the same simulated instants, so any difference is a bug in one of them. The
regression cases at the end are the divergences this suite found, kept.
"""

from __future__ import annotations

import warnings

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings

import sim
from sim.scenario.dists import Dist
from sim.scenario.settings import (
    Faults,
    Policy,
    Scenario,
    ScriptedCrash,
    ScriptedOutage,
    Workload,
    preset,
    preset_names,
)
from tests.model.scripts import fidelity_scenarios, mechanism_scenarios

from .generate import scenarios

pytestmark = pytest.mark.postgres

PRESET_SCALE = {"workload.jobs": 150, "horizon": 600.0}  # upper bounds: a few wall seconds each


def run_both(scenario: Scenario, dsn: str) -> tuple[sim.results.Run, sim.results.Run]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # generated settings may be risky on purpose
        memory = sim.run(scenario, backend="memory", progress=False)
        postgres = sim.run(scenario, backend="postgres", dsn=dsn, progress=False)
    return memory, postgres


def assert_same(memory, postgres) -> None:
    assert postgres.backend == "postgres" and memory.backend == "memory"
    pd.testing.assert_frame_equal(memory.events, postgres.events)
    for table in ("jobs", "ledger", "processed_events"):
        assert memory.tables[table] == postgres.tables[table], table
    assert memory.statement_counts == postgres.statement_counts


def scaled(name: str) -> Scenario:
    scenario = preset(name)
    return scenario.with_overrides(
        {
            "workload.jobs": min(scenario.workload.jobs, PRESET_SCALE["workload.jobs"]),
            "horizon": min(scenario.horizon, PRESET_SCALE["horizon"]),
        }
    )


@pytest.mark.parametrize("name", preset_names())
def test_every_preset_gives_the_same_run(pg_dsn, name):
    memory, postgres = run_both(scaled(name), pg_dsn)
    assert_same(memory, postgres)
    assert memory.summary["leases"] > 0


@settings(
    max_examples=150,
    derandomize=True,
    deadline=None,
    database=None,
    print_blob=True,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.function_scoped_fixture,
        HealthCheck.data_too_large,
    ],
)
@given(scenario=scenarios())
def test_generated_scenarios_give_the_same_run(pg_dsn, scenario):
    memory, postgres = run_both(scenario, pg_dsn)
    assert_same(memory, postgres)


# ---- regression cases ---------------------------------------------------------------------------


def _small(
    workers: int, claim: str, *, jobs: int = 3, horizon: float = 10.0, faults=None, **policy
) -> Scenario:
    return Scenario(
        name="regression",
        workload=Workload(
            jobs=jobs,
            processing=Dist.constant(0.05),
            psp_at=0.0,
            psp_call=Dist.constant(0.01),
            statement_latency=Dist.lognormal(0.0005, 0.00075),
        ),
        policy=Policy(
            workers=workers, claim=claim, poll_interval=0.05, random_phase=False, **policy
        ),
        faults=faults or Faults(),
        horizon=horizon,
        seed=0,
    )


@pytest.mark.parametrize("repeat", range(3))
def test_waiters_queued_on_one_row_go_on_in_the_order_they_began_to_wait(pg_dsn, repeat):
    """Found: eight read-then-write workers all take job 1, and their unfenced completions queue
    on its row behind the first one's open transaction. When a holder commits, PostgreSQL wakes
    the next waiter and lets the one queued behind it race it for the row's new version, so the
    real server sometimes let the third waiter overtake the second (MemoryBackend: strict order).
    Fixed in PostgresBackend: waiters are paused while their holder ends and let go one by one
    when the simulation resumes them. Repeated, since the race did not lose every time."""
    memory, postgres = run_both(
        _small(
            8,
            "read_then_write",
            fencing=False,
            heartbeat=False,
            watcher=False,
            claim_takes_expired=False,
        ),
        pg_dsn,
    )
    chained = memory.events[
        (memory.events.kind == "lock_wait") & memory.events.detail.str.contains(">")
    ]
    assert len(chained) >= 3  # waits that outlived more than one holder: the queue was long
    assert_same(memory, postgres)


def test_select_for_update_convoy_keeps_its_order(pg_dsn):
    """The same race in a FOR UPDATE claim: idle workers queue on the oldest Pending row."""
    memory, postgres = run_both(
        _small(6, "select_for_update", jobs=12, select_to_update_gap=0.01), pg_dsn
    )
    assert (memory.events.kind == "lock_wait").sum() >= 5
    assert_same(memory, postgres)


def test_a_transaction_begun_during_a_partition_waits_for_the_connection(pg_dsn):
    """Found: a worker whose connection a partition had cut issued BEGIN (which travels with the
    next statement) before crossing the partition, so both backends raised ClientCrashedError
    and the run died. Fixed in DbSession: BEGIN goes out with the first statement, after the
    reconnection."""
    faults = Faults(
        partitions=(ScriptedOutage(worker=0, at=0.02, duration=1.0),), partition_mode="fail"
    )
    memory, postgres = run_both(
        _small(2, "select_for_update", jobs=20, horizon=5.0, faults=faults), pg_dsn
    )
    assert (memory.events.kind == "db_error").sum() >= 2
    assert memory.summary["completed"] >= 15
    assert_same(memory, postgres)


def test_a_waiter_that_died_and_came_back_queues_at_the_end(pg_dsn):
    """Found: w0 holds job 1 (FOR UPDATE claim) through a 2 s pause; w1..w6 queue behind it;
    w5 crashes while queued and, restarted, queues again, now behind w6. PostgreSQL dropped
    w5's first wait with its connection; the simulation's registry of waiters still held it
    and resumed w5 at its old place. Fixed in DbSession: a registration belongs to one wait."""
    faults = Faults(
        pauses=(ScriptedOutage(worker=0, at=0.0, duration=2.0),),
        crashes=(ScriptedCrash(at=0.5, worker=5), ScriptedCrash(at=1.9, worker=0)),
        restart_delay=Dist.constant(1.0),
    )
    scenario = Scenario(
        name="regression",
        workload=Workload(
            jobs=3,
            processing=Dist.constant(1.0),
            psp_at=0.0,
            psp_call=Dist.constant(0.5),
            statement_latency=Dist.constant(0.001),
        ),
        policy=Policy(
            workers=7,
            claim="select_for_update",
            claim_takes_expired=False,
            select_to_update_gap=0.001,
            lease_ttl=1.0,
            heartbeat=False,
            watcher=False,
            fencing=False,
            random_phase=False,
        ),
        faults=faults,
        horizon=10.0,
        seed=0,
    )
    memory, postgres = run_both(scenario, pg_dsn)
    waits = memory.events[memory.events.kind == "lock_wait"]
    assert waits.worker.tolist()[4:6] == ["w6", "w5"]
    assert waits.detail.iloc[5].startswith("w0>w1>w2>w3>w4>w6:")
    assert_same(memory, postgres)


@pytest.mark.parametrize("name", list(fidelity_scenarios()))
def test_the_fidelity_scenarios_give_the_same_run(pg_dsn, name):
    """Issue #16's settings on both backends: same log, same tables (graphile-worker v0.16 is a
    preset, covered above)."""
    memory, postgres = run_both(fidelity_scenarios()[name], pg_dsn)
    assert_same(memory, postgres)
    kinds = set(memory.events["kind"])
    assert {
        "poison job": "requeue",
        "held by a dead owner": "crash",
        "watcher gap": "requeue",
        "deadline": "late_result",
        "deadline, completed late": "complete",
        "deadline, cancelled": "cancel",
        "deadline, cancelled mid-transaction": "cancel",
        "retry backoff": "requeue",
        "graceful shutdown": "release",
        "finished and failed": "requeue",
        "background completion": "complete_rejected",
    }[name] in kinds


@pytest.mark.parametrize("name", list(mechanism_scenarios()))
def test_the_mechanism_scenarios_give_the_same_run(pg_dsn, name):
    """Issue #25's exact-timeline scenarios (worker clocks, ...) on both backends: same log,
    same tables."""
    memory, postgres = run_both(mechanism_scenarios()[name], pg_dsn)
    assert_same(memory, postgres)
