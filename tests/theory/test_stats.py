"""sim.theory.stats: one implementation of per-group means and Student-t intervals, checked against
hand-computed numbers, and shared by SweepResult.aggregate."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import sim
from sim.errors import ConfigError
from sim.sweeps import SweepResult
from sim.theory.stats import mean_ci, summarize

# t quantiles, from a table: t(0.975; 1 dof) and t(0.975; 2 dof), t(0.95; 2 dof)
T975_1, T975_2, T95_2 = 12.706204736, 4.302652730, 2.919985580

# three groups of runs: a = 10, NaN, 12, 14; b = 7, NaN; c = NaN, NaN
RUNS = pd.DataFrame(
    {
        "policy.lease_ttl": [20.0, 20.0, 20.0, 20.0, 30.0, 30.0, 45.0, 45.0],
        "replication": [0, 1, 2, 3, 0, 1, 0, 1],
        "seed": [1, 2, 3, 4, 5, 6, 7, 8],
        "recovery_latency_mean": [10.0, np.nan, 12.0, 14.0, 7.0, np.nan, np.nan, np.nan],
        "completed": [5, 5, 5, 5, 4, 6, 3, 3],
    }
)


def test_a_hand_computed_t_interval_leaves_the_missing_value_out():
    table = summarize(RUNS, "policy.lease_ttl", ["recovery_latency_mean"]).set_index(
        "policy.lease_ttl"
    )
    # 10, 12, 14: mean 12, sample std 2, standard error 2 / sqrt(3), 2 degrees of freedom
    half = T975_2 * 2 / np.sqrt(3)  # 4.9683
    assert table.loc[20.0, "n"] == 4  # runs in the group, including the one without a value
    assert table.loc[20.0, "recovery_latency_mean_mean"] == pytest.approx(12.0)
    assert table.loc[20.0, "recovery_latency_mean_ci_low"] == pytest.approx(12.0 - half, abs=1e-6)
    assert table.loc[20.0, "recovery_latency_mean_ci_high"] == pytest.approx(12.0 + half, abs=1e-6)
    assert 12.0 - half == pytest.approx(7.031725, abs=1e-6)


def test_one_value_has_no_interval_and_no_value_has_no_mean():
    table = summarize(RUNS, "policy.lease_ttl", ["recovery_latency_mean"]).set_index(
        "policy.lease_ttl"
    )
    assert table["n"].tolist() == [4, 2, 2]
    assert table.loc[30.0, "recovery_latency_mean_mean"] == 7.0
    assert np.isnan(table.loc[30.0, "recovery_latency_mean_ci_low"])
    assert np.isnan(table.loc[30.0, "recovery_latency_mean_ci_high"])
    assert (
        table.loc[[45.0], ["recovery_latency_mean_mean", "recovery_latency_mean_ci_low"]]
        .isna()
        .all(axis=None)
    )


def test_identical_values_give_a_zero_width_interval_and_confidence_is_honoured():
    table = summarize(RUNS, "policy.lease_ttl", ["completed"], confidence=0.9).set_index(
        "policy.lease_ttl"
    )
    assert table.loc[
        20.0, ["completed_mean", "completed_ci_low", "completed_ci_high"]
    ].tolist() == [5.0, 5.0, 5.0]
    # 4 and 6: mean 5, std sqrt(2), standard error 1, 1 degree of freedom, 90%: t(0.95; 1) = 6.3138
    assert table.loc[30.0, "completed_ci_high"] == pytest.approx(5.0 + 6.313751515, abs=1e-6)


def test_mean_ci_is_the_same_formula():
    mean, low, high, n = mean_ci([10.0, None, 12.0, np.nan, 14.0, np.inf], confidence=0.9)
    half = T95_2 * 2 / np.sqrt(3)
    assert (mean, n) == (12.0, 3)
    assert (low, high) == (
        pytest.approx(12.0 - half, abs=1e-6),
        pytest.approx(12.0 + half, abs=1e-6),
    )
    assert np.isnan(mean_ci([7.0])[1]) and mean_ci([7.0])[0] == 7.0
    assert np.isnan(mean_ci([])[0])


def test_infinite_values_count_as_missing():
    runs = RUNS.assign(recovery_latency_mean=RUNS["recovery_latency_mean"].fillna(np.inf))
    same = summarize(runs, "policy.lease_ttl", ["recovery_latency_mean"])
    pd.testing.assert_frame_equal(
        same, summarize(RUNS, "policy.lease_ttl", ["recovery_latency_mean"])
    )


def test_defaults_order_and_the_one_group_case():
    table = summarize(RUNS, "policy.lease_ttl")
    assert list(table.columns) == [
        "policy.lease_ttl",
        "n",
        "recovery_latency_mean_mean",
        "recovery_latency_mean_ci_low",
        "recovery_latency_mean_ci_high",
        "completed_mean",
        "completed_ci_low",
        "completed_ci_high",
    ]
    reversed_runs = RUNS.iloc[::-1]
    assert summarize(reversed_runs, "policy.lease_ttl")["policy.lease_ttl"].tolist() == [
        20.0,
        30.0,
        45.0,
    ]
    assert summarize(reversed_runs, "policy.lease_ttl", sort=False)[
        "policy.lease_ttl"
    ].tolist() == [45.0, 30.0, 20.0]
    whole = summarize(RUNS, [], ["completed"])
    assert list(whole.columns) == ["n", "completed_mean", "completed_ci_low", "completed_ci_high"]
    assert whole["n"].tolist() == [8] and whole.loc[0, "completed_mean"] == pytest.approx(36 / 8)


def test_aggregate_is_summarize_in_grid_order():
    scenario = sim.preset("crash-recovery")
    result = SweepResult(
        runs=RUNS,
        scenario=scenario,
        grid={"policy.lease_ttl": [20.0, 30.0, 45.0]},
        replications=4,
        seed=0,
    )
    pd.testing.assert_frame_equal(
        result.aggregate(confidence=0.9), summarize(RUNS, "policy.lease_ttl", confidence=0.9)
    )
    table = result.aggregate(["recovery_latency_mean"])
    assert table.loc[0, "recovery_latency_mean_ci_low"] == pytest.approx(
        12.0 - T975_2 * 2 / np.sqrt(3), abs=1e-6
    )


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"confidence": 95}, "confidence: must be between 0 and 1, got 95"),
        ({"confidence": 0}, "confidence: must be between 0 and 1"),
        ({"metrics": ["recovery"]}, "recovery: not a column of the frame"),
        ({"by": "policy.ttl"}, "policy.ttl: not a column of the frame"),
    ],
)
def test_bad_arguments_are_one_config_error_line(kwargs, message):
    kwargs = {"by": "policy.lease_ttl", **kwargs}
    with pytest.raises(ConfigError) as caught:
        summarize(RUNS, **kwargs)
    assert message in str(caught.value) and "\n" not in str(caught.value)
