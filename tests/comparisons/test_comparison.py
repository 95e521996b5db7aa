"""sim.compare's verdict, with simulated runs standing in for the live one (no server needed):
a run that double-claims beside runs that do not DIFFERs on that row and is never called
"within"; runs of one queue agree; a recovery row below the stated count says so; an unsound
live run judges nothing; the table's figures are the ones the sentence quotes."""

from __future__ import annotations

import numpy as np
import pytest

import sim
from sim.comparisons.live_vs_simulated import (
    AGREE,
    DIFFER,
    JUDGED_ROWS,
    MEAN,
    MIN_RECOVERIES,
    TOO_FEW,
    _count_row,
    _recovery_rows,
    compare,
    poisson_interval,
)
from sim.live_mode.settings import hand_check
from sim.theory.stats import mean_ci


def _race(claim: str, seed: int):
    scenario = sim.scenario.settings.preset("read-then-write-race").with_overrides(
        {"policy.claim": claim}
    )
    return sim.run(scenario.replace(horizon=40.0), seed=seed, progress=False)


@pytest.fixture(scope="module")
def races():
    """The read-then-write race: the unconditional claim double-claims (as the user's queue in
    examples/queues/read-then-write does); the conditional one, Lease Lab's, never does."""
    return {
        "read_then_write": [_race("read_then_write", seed) for seed in range(1, 7)],
        "conditional_update": [_race("conditional_update", seed) for seed in range(1, 7)],
    }


def test_double_claims_the_simulation_lacks_differ_and_are_never_within(races):
    live = races["read_then_write"][0]
    assert live.summary["double_claims"] >= 3
    c = compare(live, races["conditional_update"][1:])
    row = c.table.loc["double claims per run"]
    assert (
        row.verdict == DIFFER and row.simulated == 0 and row.live == live.summary["double_claims"]
    )
    assert row.compared == "live / simulated" and row.estimate == np.inf and row.low > 1
    assert c.differ[0] == "double claims per run" and not c.agree
    assert c.verdict.startswith(
        f"live and simulated DIFFER on double claims per run: live {row.live:g}, simulated 0, "
        f"live / simulated inf [{row.low:.3g}, inf]"
    )
    assert "within" not in c.verdict and "agree on all" not in c.verdict
    assert f"{c.row_confidence:.2%}" in c.verdict and c.row_confidence == 1 - 0.05 / JUDGED_ROWS


def test_runs_of_the_same_queue_agree_on_every_count(races):
    runs = races["read_then_write"]
    c = compare(runs[0], runs[1:])
    counts = c.table.loc[c.table.compared == "live / simulated"]
    assert (counts.verdict == AGREE).all(), counts
    row = c.table.loc["double claims per run"]
    assert row.simulated > 0 and row.low < 1 < row.high
    live_low, live_high = poisson_interval(row.live)
    assert (row.live_low, row.live_high) == pytest.approx((live_low, live_high))


def test_recovery_rows_below_the_stated_count_are_not_judged():
    scenario = hand_check(horizon=10.0)  # a few kills: fewer recoveries than MIN_RECOVERIES
    live = sim.run(scenario, seed=50, progress=False)
    c = compare(live, [sim.run(scenario, seed=s, progress=False) for s in (51, 52)])
    assert len(c.live_latencies) < MIN_RECOVERIES
    assert (c.table.loc[MEAN:"recovery latency p90 (s)", "verdict"] == TOO_FEW).all()
    assert not c.agree
    assert (
        f"recovery latency: {TOO_FEW} ({len(c.live_latencies)} live and "
        f"{len(c.simulated_latencies)} simulated; at least {MIN_RECOVERIES} each)"
    ) in c.verdict


def test_intervals_of_latencies_and_counts_stop_at_zero():
    """Issue 34: two live recoveries 3.5 s apart give a t interval that reaches below zero; a
    latency (or a count per run) cannot, so the table's side intervals stop at zero, while the
    difference live - simulated keeps its sign."""
    live, simulated = np.array([0.4, 3.9]), np.array([0.3, 0.5, 4.2])
    assert mean_ci(live)[1] < 0 and mean_ci(simulated)[1] < 0
    rows = _recovery_rows(live, simulated, 0.95, 0.99)
    mean, live_low, live_high, simulated_mean, sim_low, sim_high = rows[MEAN][:6]
    assert (live_low, sim_low) == (0.0, 0.0)
    assert (mean, live_high) == pytest.approx(mean_ci(live)[::2][:2])
    assert (simulated_mean, sim_high) == pytest.approx(mean_ci(simulated)[::2][:2])
    assert rows[MEAN][8] < 0  # the difference's own interval may well be negative
    count = _count_row(2.0, [0.0, 0.0, 0.0, 5.0], 0.95, 0.99)
    assert count[3] == pytest.approx(1.25) and count[4] == 0.0


@pytest.mark.slow  # replications: make test only
def test_recovery_rows_judge_the_difference_with_its_own_interval():
    """Enough recoveries: the mean's difference interval is Welch's at the row confidence, and a
    run whose TTL is a second longer is told apart on the mean, p50 and p90."""
    scenario = hand_check(horizon=60.0)
    sims = [sim.run(scenario, seed=s, progress=False) for s in range(2, 6)]
    same = compare(sim.run(scenario, seed=1, progress=False), sims)
    row = same.table.loc[MEAN]
    assert len(same.live_latencies) >= MIN_RECOVERIES
    assert row.verdict == AGREE and row.low < 0 < row.high
    assert row.estimate == pytest.approx(
        same.live_latencies.mean() - same.simulated_latencies.mean()
    )
    longer = sim.run(hand_check(horizon=60.0, **{"policy.lease_ttl": 3.0}), seed=1, progress=False)
    other = compare(longer, sims)
    assert other.differ[:3] == [MEAN, "recovery latency p50 (s)", "recovery latency p90 (s)"]
    assert other.table.loc[MEAN, "low"] > 0.5


def test_an_unsound_live_run_judges_nothing(races):
    live = races["read_then_write"][0]
    live.unsound = ["statement latency: select_candidates took 15 ms ..."]
    try:
        c = compare(live, races["read_then_write"][1:3])
    finally:
        del live.unsound
    assert not c.sound and not c.agree
    assert c.verdict.startswith(
        "no verdict: the live run is UNSOUND (statement latency: select_candidates took 15 ms "
        "...), so its figures test nothing; the rows alone would say: "
    )
    assert str(c).endswith(
        "warning: the live run is unsound: statement latency: select_candidates took 15 ms ..."
    )


def test_compare_simulates_the_live_runs_statements():
    """No queue: Lease Lab's statements on the memory backend, said in the verdict."""
    c = compare(sim.run(hand_check(horizon=5.0), seed=3, progress=False), 2)
    assert c.seeds == 2 and c.simulated_with == "Lease Lab's statements on the memory backend"
    assert c.simulated_with in c.verdict
