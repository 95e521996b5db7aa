"""Claim strategies under contention: read-then-write races; the atomic claims never double
claim."""

import numpy as np
import pytest
from scipy import stats

from sim import preset, run


def _race(claim: str, **overrides):
    return run(preset("read-then-write-race"), **{"policy.claim": claim, **overrides})


def test_read_then_write_double_claims_and_double_charges():
    """Eight workers, ten seeds: the fraction of leases that were double claims has a 99% CI above
    zero."""
    fractions, charges = [], []
    for seed in range(1, 11):
        r = _race("read_then_write", **{"seed": seed})
        fractions.append(r.summary["double_claims"] / r.summary["leases"])
        charges.append(r.summary["duplicate_external_effects"])
    low, high = stats.t.interval(
        0.99, len(fractions) - 1, loc=np.mean(fractions), scale=stats.sem(fractions)
    )
    assert low > 0.01, f"double-claim fraction CI [{low:.4f}, {high:.4f}]"
    assert high < 0.5
    assert min(charges) >= 1


def test_read_then_write_with_four_workers_still_races():
    r = _race("read_then_write", **{"policy.workers": 4, "workload.jobs": 400, "horizon": 300.0})
    report = r.check()
    assert report.counts()["double_claim"] == r.summary["double_claims"] > 0
    assert r.summary["duplicate_external_effects"] > 0


@pytest.mark.parametrize("claim", ["conditional_update", "skip_locked", "select_for_update"])
def test_atomic_claims_never_double_claim_over_10k_jobs(claim):
    r = _race(claim, **{"workload.jobs": 10_000, "horizon": 2_000.0, "policy.fencing": True})
    assert r.summary["completed"] == 10_000
    assert r.summary["double_claims"] == 0
    assert r.summary["duplicate_db_effects"] == 0
    assert r.summary["duplicate_external_effects"] == 0
    assert r.check().ok


def test_dedup_keeps_the_ledger_exact_even_under_read_then_write():
    r = _race("read_then_write", **{"policy.dedup": True})
    assert r.summary["double_claims"] > 0
    counts = r.table_ledger["event_id"].value_counts()
    assert counts.max() == 1 and len(counts) == r.summary["jobs"]


def test_idempotency_key_charges_each_payment_once_even_under_read_then_write():
    r = _race("read_then_write", **{"policy.idempotency_key": True})
    assert r.summary["double_claims"] > 0
    assert r.summary["duplicate_external_effects"] == 0
    replays = (r.events.kind == "psp_charge") & (r.events.detail == "replay")
    assert replays.sum() > 0
