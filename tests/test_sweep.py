"""sim.sweep: grid validation, reproducible per-run seeds, executors (serial, process pool, Dask),
confidence intervals, and Parquet round trips."""

from __future__ import annotations

import concurrent.futures as cf

import numpy as np
import pandas as pd
import pytest
from scipy import stats

import sim
from sim.errors import ConfigError
from sim.sweeps import SweepResult, point_key, run_seed, sweep
from sim.theory.stats import wilson_interval

# a small crash-recovery: 15 simulated minutes, ~135 jobs, a few crashes per run
SMALL = sim.preset("crash-recovery").with_overrides({"horizon": 900.0, "workload.jobs": 150})
GRID = {"policy.watcher_interval": [10, 30], "policy.lease_ttl": [20.0, 40.0]}
METRICS = [
    "jobs",
    "completed",
    "false_expiries",
    "recoveries",
    "recovery_latency_mean",
    "db_heartbeat_per_s",
]


@pytest.fixture(scope="module")
def serial() -> SweepResult:
    return sweep(SMALL, GRID, replications=3, seed=7, executor="serial")


def test_runs_table_has_one_row_per_run_in_grid_order(serial):
    runs = serial.runs
    assert list(runs.columns[:4]) == [
        "policy.watcher_interval",
        "policy.lease_ttl",
        "replication",
        "seed",
    ]
    assert len(runs) == 2 * 2 * 3
    points = runs[["policy.watcher_interval", "policy.lease_ttl"]].drop_duplicates().values.tolist()
    assert points == [[10, 20.0], [10, 40.0], [30, 20.0], [30, 40.0]]
    assert runs["replication"].tolist() == [0, 1, 2] * 4
    assert runs["seed"].is_unique
    assert {
        "completed",
        "false_expiries",
        "recovery_latency_p95",
        "statements_per_s",
        "db_heartbeat_per_s",
        "db_requeue_expired_per_s",
    } <= set(runs.columns)
    assert runs["jobs"].dtype == np.int64 and runs["recovery_latency_mean"].dtype == np.float64
    assert serial.keys == list(GRID) and serial.metrics[0] == "jobs"


def test_each_row_is_the_run_of_its_seed(serial):
    row = {
        name: serial.runs.at[5, name] for name in serial.runs.columns
    }  # not iloc: a float64 row rounds the seed
    again = sim.run(
        SMALL,
        seed=int(row["seed"]),
        **{
            "policy.watcher_interval": int(row["policy.watcher_interval"]),
            "policy.lease_ttl": float(row["policy.lease_ttl"]),
        },
    ).summary
    for name in ("completed", "leases", "recovery_latency_mean", "statements_per_s"):
        assert row[name] == pytest.approx(again[name], nan_ok=True)


def test_seeds_depend_only_on_point_and_replication():
    assert run_seed(7, {"a.b": 20}, 0) == run_seed(7, {"a.b": 20.0}, 0)  # 20 and 20.0 are one point
    assert run_seed(7, {"x.y": 1, "a.b": 2}, 3) == run_seed(7, {"a.b": 2, "x.y": 1}, 3)  # key order
    assert len({run_seed(7, {"a.b": 20}, r) for r in range(100)}) == 100
    assert run_seed(7, {"a.b": 20}, 0) != run_seed(8, {"a.b": 20}, 0)
    assert (
        point_key({"policy.lease_ttl": 20, "policy.claim": "skip_locked"})
        == '{"policy.claim":"skip_locked","policy.lease_ttl":20.0}'
    )


def test_adding_points_and_replications_keeps_other_runs(serial):
    bigger = sweep(
        SMALL,
        {"policy.watcher_interval": [5, 10, 30], "policy.lease_ttl": [20.0, 40.0]},
        replications=4,
        seed=7,
        executor="serial",
        metrics=METRICS,
    )
    key = ["policy.watcher_interval", "policy.lease_ttl", "replication"]
    merged = serial.runs[key + ["seed"] + METRICS].merge(bigger.runs, on=key, suffixes=("", "_big"))
    assert len(merged) == len(serial.runs)
    for name in ["seed"] + METRICS:
        pd.testing.assert_series_equal(merged[name], merged[f"{name}_big"], check_names=False)


@pytest.mark.slow  # starts a process pool and a dask cluster: make test only
def test_process_pool_and_dask_give_the_serial_frame(serial):
    pooled = sweep(SMALL, GRID, replications=3, seed=7)  # the default process pool
    pd.testing.assert_frame_equal(pooled.runs, serial.runs)
    with cf.ThreadPoolExecutor(2) as threads:
        pd.testing.assert_frame_equal(
            sweep(SMALL, GRID, replications=3, seed=7, executor=threads).runs, serial.runs
        )

    distributed = pytest.importorskip("distributed")
    with (
        distributed.LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=True,
            dashboard_address=None,
            silence_logs=50,
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        on_dask = sweep(SMALL, GRID, replications=3, seed=7, executor=client.get_executor())
    pd.testing.assert_frame_equal(on_dask.runs, serial.runs)


def test_single_worker_runs_in_process(serial):
    one = sweep(SMALL, GRID, replications=3, seed=7, max_workers=1, metrics=METRICS)
    pd.testing.assert_frame_equal(one.runs, serial.runs[list(serial.runs.columns[:4]) + METRICS])


def test_aggregate_is_a_t_interval_per_point(serial):
    table = serial.aggregate(["recovery_latency_mean", "completed"], confidence=0.9)
    assert list(table.columns) == [
        "policy.watcher_interval",
        "policy.lease_ttl",
        "n",
        "recovery_latency_mean_mean",
        "recovery_latency_mean_ci_low",
        "recovery_latency_mean_ci_high",
        "completed_mean",
        "completed_ci_low",
        "completed_ci_high",
    ]
    assert len(table) == 4 and (table["n"] == 3).all()
    runs = serial.runs
    first = runs[(runs["policy.watcher_interval"] == 10) & (runs["policy.lease_ttl"] == 20.0)][
        "completed"
    ]
    low, high = stats.t.interval(0.9, 2, loc=first.mean(), scale=stats.sem(first))
    assert table.loc[0, "completed_mean"] == pytest.approx(first.mean())
    assert table.loc[0, "completed_ci_low"] == pytest.approx(low)
    assert table.loc[0, "completed_ci_high"] == pytest.approx(high)
    every = serial.aggregate()
    assert "false_expiries_ci_high" in every and "db_requeue_expired_per_s_mean" in every


def test_aggregate_skips_missing_values_and_needs_two_for_an_interval():
    runs = pd.DataFrame(
        {
            "policy.lease_ttl": [20.0] * 3 + [30.0] * 2,
            "replication": [0, 1, 2, 0, 1],
            "seed": [1, 2, 3, 4, 5],
            "recovery_latency_mean": [10.0, np.nan, 14.0, np.nan, 7.0],
        }
    )
    result = SweepResult(
        runs=runs, scenario=SMALL, grid={"policy.lease_ttl": [20.0, 30.0]}, replications=3, seed=0
    )
    table = result.aggregate()
    assert table["n"].tolist() == [3, 2]
    assert table.loc[0, "recovery_latency_mean_mean"] == 12.0
    # 10 and 14: std sqrt(8), standard error 2, t(0.975; 1 dof) = 12.7062
    assert table.loc[0, "recovery_latency_mean_ci_low"] == pytest.approx(
        12.0 - 2 * 12.706204736, abs=1e-6
    )
    assert table.loc[0, "recovery_latency_mean_ci_high"] == pytest.approx(
        12.0 + 2 * 12.706204736, abs=1e-6
    )
    assert table.loc[1, "recovery_latency_mean_mean"] == 7.0
    assert np.isnan(table.loc[1, "recovery_latency_mean_ci_low"])


def test_no_grid_is_one_point():
    result = sweep(SMALL, {}, replications=2, seed=1, executor="serial", metrics=["completed"])
    assert list(result.runs.columns) == ["replication", "seed", "completed"]
    table = result.aggregate()
    assert list(table.columns) == ["n", "completed_mean", "completed_ci_low", "completed_ci_high"]
    assert table["n"].tolist() == [2]


def test_save_and_load_round_trip(serial, tmp_path):
    out = tmp_path / "sweep"
    written = serial.save(out)
    assert [p.name for p in written] == ["runs.csv", "aggregate.csv", "sweep.parquet"]
    pd.testing.assert_frame_equal(pd.read_csv(out / "runs.csv"), serial.runs, check_dtype=False)
    assert len(pd.read_csv(out / "aggregate.csv")) == len(serial.aggregate())
    for path in (out, out / "sweep.parquet"):  # the directory, or its parquet file
        loaded = SweepResult.load(path)
        pd.testing.assert_frame_equal(loaded.runs, serial.runs)
        assert loaded.scenario == SMALL
        assert loaded.grid == GRID and loaded.replications == 3 and loaded.seed == 7
        pd.testing.assert_frame_equal(loaded.aggregate(), serial.aggregate())
    before = (out / "runs.csv").read_bytes()
    with pytest.raises(ConfigError, match="directory is not empty; .* pass overwrite=True"):
        serial.save(out)
    assert (out / "runs.csv").read_bytes() == before
    assert serial.save(out, overwrite=True) == written
    pd.DataFrame({"a": [1]}).to_parquet(tmp_path / "plain.parquet")
    with pytest.raises(ConfigError, match="not a Lease Lab sweep"):
        SweepResult.load(tmp_path / "plain.parquet")
    with pytest.raises(ConfigError, match="no such file"):
        SweepResult.load(tmp_path / "missing.parquet")


def test_grid_values_may_be_tables_and_numpy():
    grid = {
        "workload.processing": [
            {"kind": "constant", "value": 2.0},
            {"kind": "exponential", "mean": 2.0},
        ],
        "policy.workers": np.array([2, 3]),
    }
    result = sweep(SMALL, grid, replications=1, seed=1, executor="serial", metrics=["completed"])
    assert result.runs["workload.processing"].tolist()[0] == '{"kind": "constant", "value": 2.0}'
    assert result.runs["policy.workers"].tolist() == [2, 3, 2, 3]


@pytest.mark.parametrize(
    "grid, message",
    [
        ({"policy.lease_tl": [20]}, "policy.lease_tl: unknown key; did you mean policy.lease_ttl?"),
        ({"polcy.lease_ttl": [20]}, "polcy: unknown section; did you mean policy?"),
        ({"policy.lease_ttl": [20, -1]}, "policy.lease_ttl: must be > 0 seconds"),
        ({"policy.claim": ["skip_locked", "optimistic"]}, "policy.claim: must be one of"),
        ({"policy.workers": [2.5]}, "policy.workers: expected a whole number"),
        ({"policy.lease_ttl": []}, "grid: policy.lease_ttl: has no values"),
        ({"policy.lease_ttl": 20}, "grid: policy.lease_ttl: expected a list of values"),
        ({"policy.lease_ttl": [20, 20.0]}, "grid: policy.lease_ttl: a value is listed twice"),
        ({"seed": [1, 2]}, "grid: seed is set per run"),
    ],
)
def test_bad_grids_fail_before_running_with_one_line(grid, message):
    with pytest.raises(ConfigError) as caught:
        sweep(SMALL, grid, replications=2, executor="serial")
    assert message in str(caught.value) and "\n" not in str(caught.value)


def test_bad_arguments():
    with pytest.raises(ConfigError, match="replications: must be a whole number >= 1"):
        sweep(SMALL, {}, replications=0)
    with pytest.raises(ConfigError, match="no such preset; did you mean crash-recovery"):
        sweep("crash-recovry", {}, replications=1)
    with pytest.raises(
        ConfigError, match="'recovery_latency' is not a summary metric; did you mean"
    ):
        sweep(SMALL, {}, replications=1, metrics=["recovery_latency"])
    with pytest.raises(ConfigError, match="executor: 'threads'"):
        sweep(SMALL, {}, replications=1, executor="threads")
    result = sweep(SMALL, {}, replications=2, seed=1, executor="serial", metrics=["completed"])
    with pytest.raises(ConfigError, match="confidence"):
        result.aggregate(confidence=95)
    with pytest.raises(ConfigError, match="did you mean completed"):
        result.aggregate(["complete"])


def test_progress_bar_when_asked(capsys):
    sweep(
        SMALL, {}, replications=2, seed=1, executor="serial", metrics=["completed"], progress=True
    )
    assert "sweep crash-recovery" in capsys.readouterr().err


def test_wilson_interval():
    low, high = wilson_interval(0, 1000, 0.99)
    assert low == 0 and 0.004 < high < 0.008
    low, high = wilson_interval(50, 1000, 0.95)
    assert low < 0.05 < high
    assert np.isnan(wilson_interval(0, 0)[0])
