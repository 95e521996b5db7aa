"""Random scripts of statements with SEVERAL clients waiting at once, on both backends.

tests/contract/test_differential.py stops a script at its second simultaneous wait, because a
bare PostgreSQL lets two waiters on one row race once their holder ends. PostgresBackend pauses
waiters while their holder ends and lets each go on only when it is resumed, so here scripts run
to the end: when a transaction ends, its waiters are resumed in the order they began to wait,
as the simulation does, and both backends must give the same rows, errors, waits and tables.
"""

from __future__ import annotations

import pytest

from sim.db.memory import MemoryBackend
from sim.db.postgres import PostgresBackend
from tests.db.contract.test_differential import play, random_script

pytestmark = pytest.mark.postgres

CLIENTS = ("A", "B", "C", "D")
STEPS = 70
SEEDS = range(80)
QUERIES = (
    ["insert_job"] * 3
    + [
        "claim_conditional",
        "claim_unconditional",
        "insert_dedup_marker",
        "lock_next_candidate",
        "complete_fenced",
    ]
    * 2
    + [
        "select_candidates",
        "claim_skip_locked",
        "lock_job_nowait",
        "heartbeat",
        "complete_unfenced",
        "reject_job_fenced",
        "requeue_expired",
        "select_stuck_jobs",
        "read_dedup_marker",
        "purge_dedup_markers",
        "insert_ledger_entry",
        "count_jobs_by_status",
        "rescue_job",
        "fail_job_fenced",
        "release_job_fenced",
    ]
)


def crowded_script(seed: int) -> list[tuple]:
    return random_script(
        seed, clients=CLIENTS, steps=STEPS, queries=QUERIES, control=(0.18, 0.26, 0.3, 0.32)
    )


def test_backends_agree_with_several_waiters_at_once(pg_dsn):
    crowded = 0
    for seed in SEEDS:
        script = crowded_script(seed)
        memory, postgres = MemoryBackend(), PostgresBackend(pg_dsn)
        try:
            expected, most = play(memory, script, clients=CLIENTS, to_the_end=True)
            got, _ = play(postgres, script, clients=CLIENTS, to_the_end=True)
        finally:
            memory.close()
            postgres.close()
        for (step, on_memory), (_, on_postgres) in zip(expected, got, strict=False):
            assert on_memory == on_postgres, f"seed {seed}, at {step}"
        assert len(expected) == len(got), f"seed {seed}"
        crowded += most >= 2
    assert crowded >= 20  # scripts where two or more clients waited at the same time
