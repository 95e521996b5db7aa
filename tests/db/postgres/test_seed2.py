"""Seed 2 on a real PostgreSQL, through the model: the dedup marker and the effect commit or roll
back together, so a redelivered event is applied once, even when the two deliveries race."""

from __future__ import annotations

import pandas as pd
import pytest

import sim
from sim.scenario.dists import Dist
from sim.scenario.settings import CrashPoint, Faults

from .conftest import alive
from .scripted import scripted, timeline

pytestmark = pytest.mark.postgres


def redelivered(delay: float):
    return scripted(
        workers=2,
        dedup=True,
        horizon=90,
        workload={"duplicate_delivery": 1.0, "redelivery_delay": Dist.constant(delay)},
    )


def test_sequential_redelivery_is_applied_once(pg):
    r = sim.run(redelivered(40.0), backend=pg)
    kinds = [
        (kind, job)
        for _, kind, _, job, _ in timeline(r)
        if kind in ("effect", "dedup_skip", "complete")
    ]
    assert kinds == [("effect", 1), ("complete", 1), ("dedup_skip", 2), ("complete", 2)]
    assert r.table_ledger["event_id"].tolist() == ["evt-1"]
    assert [row[0] for row in r.tables["processed_events"]] == ["evt-1"]
    assert pg.lock_waits == []  # 40 s apart: the second marker INSERT found the first committed


def test_concurrent_redelivery_the_second_insert_really_waits(pg):
    """Two workers, two connections: w1's marker INSERT waits on w0's open transaction in
    PostgreSQL itself (pg_blocking_pids saw it), then finds the marker committed: no effect."""
    r = sim.run(redelivered(0.0), backend=pg)
    story = [step for step in timeline(r) if step[1] != "lock_wait"]
    assert story == [
        (0.002, "claim", "w0", 1, 1),
        (0.002, "claim_lost", "w1", 1, None),
        (0.004, "claim", "w1", 2, 1),
        (25.006, "effect", "w0", 1, 1),
        (25.006, "complete", "w0", 1, 1),
        (25.009, "dedup_skip", "w1", 2, 1),
        (25.009, "complete", "w1", 2, 1),
    ]
    wait = r.events[r.events.kind == "lock_wait"]
    assert [
        (round(t, 6), w, j, d) for t, w, j, d in wait[["t", "worker", "job", "detail"]].values
    ] == [(25.006, "w1", 2, "w0:0.001000")]
    # the server's own account: w1's INSERT waited for w0's transaction id
    assert pg.lock_waits == [("w1", "insert_dedup_marker", "w0", "transactionid")]
    assert r.table_ledger["event_id"].tolist() == ["evt-1"]
    assert [row[0] for row in r.tables["processed_events"]] == ["evt-1"]
    memory = sim.run(redelivered(0.0))
    pd.testing.assert_frame_equal(memory.events, r.events)


def test_crash_after_the_marker_rolls_back_and_the_retry_applies_once(pg, admin):
    """w0 dies right after its marker INSERT: its server process is terminated, PostgreSQL rolls
    the marker back, the lease lapses, and the retry (attempt 2) applies the effect once."""
    faults = Faults(crash_points=(CrashPoint("after_marker"),), restart_delay=Dist.constant(5.0))
    r = sim.run(scripted(workers=2, dedup=True, horizon=120, faults=faults), backend=pg)
    story = [(kind, worker, attempt) for _, kind, worker, _, attempt in timeline(r)]
    assert story == [
        ("claim", "w0", 1),
        ("claim_lost", "w1", None),
        ("crash", "w0", 1),
        ("restart", "w0", None),
        ("claim", "w0", 2),
        ("effect", "w0", 2),
        ("complete", "w0", 2),
    ]
    killed = [pid for client, pid in pg.terminated if client == "w0"]
    assert len(killed) == 1 and not alive(admin, killed)  # a real crash: the server process is gone
    assert r.table_ledger[["event_id", "attempt"]].values.tolist() == [["evt-1", 2]]
    effect_at = r.events.loc[r.events.kind == "effect", "t"].item()
    # the one marker is the retry's: the crashed attempt's INSERT was rolled back by PostgreSQL
    assert [(e, round(t, 6)) for e, _, t in r.tables["processed_events"]] == [
        ("evt-1", round(effect_at - 0.003, 6))
    ]
