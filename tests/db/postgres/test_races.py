"""Claim races on a real PostgreSQL: read-then-write double-claims (Hermitage P4, lost update),
the seed's atomic conditional UPDATE and FOR UPDATE SKIP LOCKED never do."""

from __future__ import annotations

import pytest

import sim
from sim.db.inspect import query_state

pytestmark = pytest.mark.postgres

RACE = {"workload.jobs": 200, "horizon": 120.0}


def test_read_then_write_double_claims_on_postgres(pg):
    """SELECT, then an unconditional UPDATE: two workers both saw Pending and both won. The real
    tables show it: the same payment twice in the ledger, two leases counted on the job."""
    r = sim.run("read-then-write-race", backend=pg, **RACE, **{"policy.claim": "read_then_write"})
    assert r.summary["double_claims"] > 0
    assert r.summary["duplicate_external_effects"] > 0
    state = query_state(pg, now=r.scenario.horizon)
    twice = state.attempts[state.attempts["effects"] > 1]
    assert len(twice) == r.summary["duplicate_db_effects"] > 0
    assert (twice["attempts"] >= 2).all()
    flagged = r.check().counts()
    assert flagged["double_claim"] == r.summary["double_claims"]  # the invariant checker sees them


@pytest.mark.parametrize("claim", ["conditional_update", "skip_locked"])
def test_atomic_claims_never_double_claim_on_postgres(pg, claim):
    r = sim.run(
        "read-then-write-race",
        backend=pg,
        **{"workload.jobs": 400, "horizon": 200.0, "policy.claim": claim},
    )
    assert r.summary["completed"] == 400
    assert r.summary["double_claims"] == 0
    assert r.summary["duplicate_db_effects"] == r.summary["duplicate_external_effects"] == 0
    state = query_state(pg)
    assert state.status_counts.to_dict() == {
        "Pending": 0,
        "Processing": 0,
        "Completed": 400,
        "Dead": 0,
    }
    assert (state.attempts["attempts"] == 1).all() and (state.attempts["effects"] == 1).all()
    if claim == "conditional_update":
        # the race was run, and lost, by the database: claims that found the job already taken
        assert (r.events.kind == "claim_lost").sum() > 0
