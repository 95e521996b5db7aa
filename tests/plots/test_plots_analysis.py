"""The analysis figures (sweeps, claim strategies, trade-offs): what they draw,
counted through gids."""

from __future__ import annotations

import itertools

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

import sim  # noqa: E402
from sim import plots  # noqa: E402
from sim.errors import ConfigError  # noqa: E402
from sim.theory import closed_forms  # noqa: E402
from sim.theory.stats import add_rates, summarize  # noqa: E402


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def sweep_runs(name: str, grid: dict, replications: int, **fixed) -> pd.DataFrame:
    """A sweep by hand, shaped like SweepResult.runs: grid keys, replication, seed,
    summary metrics."""
    rows = []
    for values in itertools.product(*grid.values()):
        point = dict(zip(grid, values, strict=True))
        for rep in range(replications):
            run = sim.run(name, seed=rep + 1, **fixed, **point)
            rows.append({**point, "replication": rep, "seed": rep + 1, **run.summary.to_dict()})
    return pd.DataFrame(rows)


def gids(ax, gid: str) -> list:
    return [a for a in [*ax.patches, *ax.lines, *ax.collections, *ax.texts] if a.get_gid() == gid]


@pytest.fixture(scope="module")
def race_runs():
    return sweep_runs(
        "read-then-write-race",
        {"policy.workers": [2, 4, 8], "policy.select_to_update_gap": [0.0, 0.02]},
        3,
        **{"workload.jobs": 60, "horizon": 60.0},
    )


# ---- double processing --------------------------------------------------------------------------


def test_double_processing_bars_rise_from_the_ideal_line():
    runs = {
        claim: [
            sim.run("read-then-write-race", seed=s, **{"policy.claim": claim, "workload.jobs": 80})
            for s in (1, 2)
        ]
        for claim in ("read_then_write", "conditional_update")
    }
    ax = plots.double_processing(runs)
    bars = gids(ax, "bar")
    assert len(bars) == 2 * len(plots.MULTIPLICITY)
    ideal = gids(ax, "ideal")
    assert len(ideal) == 1 and set(ideal[0].get_ydata()) == {1.0}
    assert all(b.get_y() == 1.0 for b in bars)  # bars start at exactly once
    # the first bar of each group is leases per job: 1 + height == the mean over the runs
    for group, claim in enumerate(runs):
        expected = np.mean([len(r.leases) / r.leases["job"].nunique() for r in runs[claim]])
        first = min(
            (b for b in bars if group - 0.5 < b.get_x() < group + 0.5), key=lambda b: b.get_x()
        )
        assert 1.0 + first.get_height() == pytest.approx(expected)
    race_heights = [b.get_height() for b in bars if b.get_x() < 0.5]
    assert min(race_heights) > 0  # claimed, charged and booked more than once under the race
    assert all(b.get_height() == pytest.approx(0.0) for b in bars if b.get_x() > 0.5)
    assert len(gids(ax, "ci")) >= 1  # replications differ under the race: whiskers
    assert [t.get_text().split("\n")[0] for t in ax.get_xticklabels()] == list(runs)
    assert ax.get_ylabel() == "count per job or payment"
    assert ax.get_title(loc="left").startswith("Double processing by claim strategy")
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "1.0 = exactly once (ideal)" in legend and "PSP charges per payment" in legend


def test_double_processing_rejects_bad_input():
    with pytest.raises(ConfigError):
        plots.double_processing({})
    with pytest.raises(ConfigError):
        plots.double_processing({"x": []})


# ---- race probability ---------------------------------------------------------------------------


def test_race_probability_one_line_and_band_per_gap(race_runs):
    ax = plots.race_probability(race_runs)
    lines, bands = gids(ax, "line"), gids(ax, "ci-band")
    assert len(lines) == len(bands) == 2
    per_run = race_runs.assign(p=race_runs["double_claims"] / race_runs["leases"])
    for line, gap in zip(lines, [0.0, 0.02], strict=True):
        expected = (
            per_run[per_run["policy.select_to_update_gap"] == gap]
            .groupby("policy.workers")["p"]
            .mean()
        )
        assert list(line.get_xdata()) == [2, 4, 8]
        assert np.allclose(line.get_ydata(), 100 * expected.to_numpy())
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["gap 0 s", "gap 20 ms"]
    assert ax.get_xlabel() == "workers"
    assert "race probability" in ax.get_ylabel()
    assert "3 runs per point" in ax.get_title(loc="left")
    # a longer gap between the read and the write races more at 8 workers
    assert lines[1].get_ydata()[-1] > lines[0].get_ydata()[-1]


def test_race_probability_from_an_aggregated_frame(race_runs):
    agg = summarize(
        add_rates(race_runs),
        ["policy.workers", "policy.select_to_update_gap"],
        ["race_probability"],
    )
    ax = plots.race_probability(agg)
    direct = plots.race_probability(race_runs)
    for a, b in zip(gids(ax, "line"), gids(direct, "line"), strict=True):
        assert np.allclose(a.get_ydata(), b.get_ydata())
    # without CI columns there is no band
    ax = plots.race_probability(
        agg.drop(columns=["race_probability_ci_low", "race_probability_ci_high"])
    )
    assert gids(ax, "ci-band") == [] and len(gids(ax, "line")) == 2


# ---- recovery vs watcher interval ---------------------------------------------------------------


@pytest.fixture(scope="module")
def watcher_sweep():
    scenario = sim.preset("crash-recovery").with_overrides(
        {"horizon": 1200.0, "workload.jobs": 150}
    )
    result = sim.sweep(
        scenario,
        {"policy.watcher_interval": [5, 30, 60]},
        replications=3,
        seed=0,
        executor="serial",
    )
    return result.aggregate()


def _theory(w: float) -> float:
    p = sim.preset("crash-recovery").policy
    return closed_forms.recovery_latency_mean(
        ttl=p.lease_ttl,
        heartbeat_interval=p.heartbeat_interval,
        poll_interval=p.poll_interval,
        watcher_interval=w,
        latency=0.002,
    )


def test_recovery_vs_interval_draws_mean_band_and_theory(watcher_sweep):
    ax = plots.recovery_vs_interval(watcher_sweep, theory=_theory)
    [simulated] = gids(ax, "simulated")
    assert list(simulated.get_xdata()) == [5, 30, 60]
    assert np.allclose(simulated.get_ydata(), watcher_sweep["recovery_latency_mean_mean"])
    assert len(gids(ax, "ci-band")) == 1
    [theory] = gids(ax, "theory")
    assert (
        len(theory.get_xdata()) == 200
        and theory.get_xdata()[0] == 5
        and theory.get_xdata()[-1] == 60
    )
    assert theory.get_ydata()[-1] == pytest.approx(_theory(60))
    assert ax.get_xlabel() == "watcher interval (s)"
    assert ax.get_ylabel() == "mean recovery latency (s)"
    assert "vs watcher interval" in ax.get_title(loc="left")
    # recovery grows with the watcher interval, like the theory says
    assert simulated.get_ydata()[-1] > simulated.get_ydata()[0]


def test_recovery_vs_interval_takes_precomputed_theory(watcher_sweep):
    series = pd.Series({w: _theory(w) for w in (5, 30, 60)})
    ax = plots.recovery_vs_interval(
        watcher_sweep, theory=series, theory_label="L - h/2 + W/2 + P/2"
    )
    [theory] = gids(ax, "theory")
    assert np.allclose(theory.get_ydata(), series.to_numpy())
    assert "L - h/2 + W/2 + P/2" in [t.get_text() for t in ax.get_legend().get_texts()]
    with pytest.raises(ConfigError):
        plots.recovery_vs_interval(watcher_sweep, theory=[1.0, 2.0])


# ---- heatmap ------------------------------------------------------------------------------------


def hand_grid() -> pd.DataFrame:
    rows = []
    for ttl, hb in itertools.product([10, 20, 30], [2, 5]):
        if (ttl, hb) == (30, 5):
            continue  # a missing cell
        rate = 0.2 if ttl == 10 else 0.01 * hb
        rows.append(
            {
                "policy.lease_ttl": ttl,
                "policy.heartbeat_interval": hb,
                "n": 4,
                "false_expiry_rate_mean": rate,
                "false_expiry_rate_ci_low": rate / 2,
                "false_expiry_rate_ci_high": rate * 1.5,
                "recovery_latency_p99_mean": ttl + hb,
            }
        )
    return pd.DataFrame(rows)


def test_heatmap_one_annotated_cell_per_setting():
    ax = plots.heatmap(hand_grid())
    cells = gids(ax, "cell")
    assert len(cells) == 5 and len(gids(ax, "cell-missing")) == 1
    labels = [t.get_text() for t in gids(ax, "cell-label")]
    assert len(labels) == 6 and "no data" in labels
    assert "20%\n[10%, 30%]" in labels
    assert [t.get_text() for t in ax.get_xticklabels()] == ["10", "20", "30"]
    assert ax.get_xlabel() == "lease TTL (s)" and ax.get_ylabel() == "heartbeat interval (s)"
    assert ax.get_title(loc="left").startswith(
        "False-expiry rate by lease TTL and heartbeat interval"
    )
    colorbar = ax.figure.axes[-1]
    assert colorbar.get_ylabel() == "false-expiry rate (% of leases)"
    # viridis: the worst cell (20%) is the brightest
    worst = max(cells, key=lambda c: sum(c.get_facecolor()[:3]))
    assert worst.get_x() == -0.5  # TTL 10 s column


def test_heatmap_of_recovery_p99_uses_cividis():
    ax = plots.heatmap(hand_grid(), value="recovery_latency_p99")
    assert len(gids(ax, "cell")) == 5
    assert ax.figure.axes[-1].get_ylabel() == "recovery latency p99 (s)"
    assert [t.get_text() for t in gids(ax, "cell-label")] == [
        "12",
        "15",
        "22",
        "25",
        "32",
        "no data",
    ]
    # cividis, from the lowest value (TTL 10 s, heartbeat 2 s) to the highest (TTL 30 s,
    # heartbeat 2 s)
    cells = gids(ax, "cell")
    assert np.allclose(cells[0].get_facecolor(), matplotlib.colormaps["cividis"](0.0))
    assert np.allclose(cells[-1].get_facecolor(), matplotlib.colormaps["cividis"](1.0))


def test_heatmap_from_simulated_runs():
    runs = sweep_runs(
        "no-heartbeat-long-jobs",
        {"policy.lease_ttl": [20, 60], "policy.heartbeat_interval": [5, 15]},
        2,
        **{"policy.heartbeat": True, "workload.jobs": 30, "horizon": 400.0},
    )
    ax = plots.heatmap(runs)
    assert len(gids(ax, "cell")) == 4
    rates = (
        add_rates(runs)
        .groupby(["policy.lease_ttl", "policy.heartbeat_interval"])["false_expiry_rate"]
        .mean()
    )
    shown = [t.get_text().split("\n")[0] for t in gids(ax, "cell-label")]
    assert shown == [plots.format_value("false_expiry_rate", v) for v in rates.to_numpy()]


# ---- trade-off ----------------------------------------------------------------------------------


def test_tradeoff_highlights_the_pareto_frontier():
    # (risk, latency): A, B and D are the frontier; C is beaten by B, E and F by D
    points = {
        "A": (0.0, 50.0),
        "B": (0.01, 30.0),
        "C": (0.02, 40.0),
        "D": (0.05, 10.0),
        "E": (0.05, 12.0),
        "F": (0.1, 10.0),
    }
    frame = pd.DataFrame(
        [
            {
                "policy.lease_ttl": 10.0 * (i + 1),
                "policy.heartbeat_interval": 2.0,
                "n": 5,
                "false_expiry_rate_mean": x,
                "recovery_latency_mean_mean": y,
                "statements_per_s_mean": 1.0 + i,
            }
            for i, (x, y) in enumerate(points.values())
        ]
    )
    assert list(
        plots.pareto_front(frame["false_expiry_rate_mean"], frame["recovery_latency_mean_mean"])
    ) == [True, True, False, True, False, False]
    ax = plots.tradeoff(frame)
    [scatter] = gids(ax, "point")
    assert len(scatter.get_offsets()) == 6
    sizes = scatter.get_sizes()
    assert sizes[0] < sizes[-1]  # marker size grows with DB load
    [front] = gids(ax, "frontier-point")
    assert sorted(map(tuple, front.get_offsets().tolist())) == [
        points["A"],
        points["B"],
        points["D"],
    ]
    [stairs] = gids(ax, "frontier")
    assert list(stairs.get_xdata()) == [0.0, 0.01, 0.05]
    labels = [t.get_text() for t in gids(ax, "point-label")]
    assert len(labels) == 6 and "TTL 40 s, hb 2 s" in labels
    assert ax.get_xlabel().startswith("false-expiry rate (% of leases)")
    assert ax.get_ylabel().startswith("mean recovery latency (s)")
    assert "DB load" in ax.figure.axes[-1].get_ylabel()
    assert ax.get_title(loc="left").startswith("Trade-off")


def test_tradeoff_from_a_simulated_sweep():
    runs = sweep_runs(
        "gc-pause-zombie", {"policy.lease_ttl": [15.0, 60.0], "policy.heartbeat_interval": [5.0]}, 2
    )
    ax = plots.tradeoff(runs, y="job_latency_p99")
    [scatter] = gids(ax, "point")
    assert len(scatter.get_offsets()) == 2
    assert len(gids(ax, "frontier-point")[0].get_offsets()) >= 1


def risk_frame(rates) -> pd.DataFrame:
    """An aggregated frame of one setting per false-expiry rate; latency falls as risk rises."""
    return pd.DataFrame(
        [
            {
                "policy.lease_ttl": 10.0 * (len(rates) - i),
                "n": 3,
                "false_expiry_rate_mean": rate,
                "recovery_latency_mean_mean": 10.0 * (len(rates) - i),
                "statements_per_s_mean": 1.0,
            }
            for i, rate in enumerate(rates)
        ]
    )


WIDE = [0.0, 1e-5, 1e-3, 0.02]  # positive rates span 3.3 decades
NARROW = [0.0, 0.002, 0.01, 0.05]  # 1.4 decades


def test_tradeoff_turns_to_a_log_x_axis_when_the_risk_spans_decades():
    ax = plots.tradeoff(risk_frame(WIDE))
    assert ax.get_xscale() == "log" and ax.get_xlabel().endswith("log scale)")
    [scatter] = gids(ax, "point")
    drawn = scatter.get_offsets()[:, 0]
    # the setting without false expiries sits on the dotted line half a decade left of 0.001%
    [line] = gids(ax, "zero-line")
    assert line.get_xdata()[0] == pytest.approx(1e-5 / 10**0.5)
    assert sorted(drawn) == pytest.approx([1e-5 / 10**0.5, 1e-5, 1e-3, 0.02])
    assert ax.get_xlim()[0] < min(drawn)
    assert (
        "false-expiry rate = 0 (a log axis has no 0)"
        in [t.get_text() for t in ax.get_legend().get_texts()][-1]
    )
    # the frontier uses the true values: every setting trades risk for recovery, so all four are
    # on it
    [front] = gids(ax, "frontier-point")
    assert len(front.get_offsets()) == 4
    ax.figure.canvas.draw()
    shown = {t.get_text() for t in ax.get_xticklabels() if t.get_text()}
    assert {
        "0.001%",
        "0.1%",
        "10%",
    } <= shown and "0.0001%" not in shown  # no tick label beside the 0 line
    [zero] = gids(ax, "zero-label")
    assert zero.get_text() == "0%" and zero.xy[0] == pytest.approx(1e-5 / 10**0.5)


def test_tradeoff_on_a_log_axis_starts_intervals_that_reach_0_at_the_edge():
    frame = risk_frame(WIDE).assign(
        false_expiry_rate_ci_low=lambda f: f["false_expiry_rate_mean"] / 2,
        false_expiry_rate_ci_high=[2e-6, 2e-5, 2e-3, 0.04],
    )
    ax = plots.tradeoff(frame)
    edge = 2e-6 / 10**0.5  # half a decade left of everything positive, the upper 2e-6 included
    assert gids(ax, "zero-line")[0].get_xdata()[0] == pytest.approx(edge)
    assert min(gids(ax, "point")[0].get_offsets()[:, 0]) == pytest.approx(edge)
    whiskers = sorted(tuple(line.get_xdata()) for line in gids(ax, "ci"))
    assert whiskers == [
        pytest.approx((edge, 2e-6)),
        pytest.approx((5e-6, 2e-5)),
        pytest.approx((5e-4, 2e-3)),
        pytest.approx((0.01, 0.04)),
    ]


def test_tradeoff_stays_linear_for_a_narrow_span_and_explicit_logx_wins():
    narrow = plots.tradeoff(risk_frame(NARROW))
    assert narrow.get_xscale() == "linear" and not gids(narrow, "zero-line")
    assert sorted(gids(narrow, "point")[0].get_offsets()[:, 0]) == NARROW
    plt.close("all")
    assert plots.tradeoff(risk_frame(WIDE), logx=False).get_xscale() == "linear"
    plt.close("all")
    forced = plots.tradeoff(risk_frame(NARROW[1:]), logx=True)
    assert forced.get_xscale() == "log" and not gids(forced, "zero-line")  # no zero: no dotted line
    assert sorted(gids(forced, "point")[0].get_offsets()[:, 0]) == pytest.approx(NARROW[1:])


def test_tradeoff_labels_come_from_the_metrics_passed():
    """The advisor's predictions (sim.teaching.advice_frame) are not simulated rates: axes, colour
    bar and the zero line's legend name the metric actually plotted."""
    frame = risk_frame(WIDE).rename(
        columns={
            "false_expiry_rate_mean": "predicted_false_expiry_mean",
            "recovery_latency_mean_mean": "predicted_recovery_mean_mean",
            "statements_per_s_mean": "predicted_db_load_mean",
        }
    )
    ax = plots.tradeoff(
        frame, x="predicted_false_expiry", y="predicted_recovery_mean", size="predicted_db_load"
    )
    assert (
        ax.get_xlabel()
        == "predicted false-expiry probability (% of jobs)  (risk: lower is better; log scale)"
    )
    assert ax.get_ylabel().startswith("predicted mean recovery latency (s)")
    assert (
        ax.figure.axes[-1]
        .get_ylabel()
        .startswith("predicted heartbeat + watcher load (statements/s)")
    )
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert (
        "on the dotted line: predicted false-expiry probability = 0 (a log axis has no 0)" in legend
    )
    assert not any("rate" in text for text in [ax.get_xlabel(), *legend])


def test_tradeoff_logx_errors_are_one_line():
    with pytest.raises(
        ConfigError, match=r"logx: expected True, False or None \(automatic\), got 'yes'"
    ):
        plots.tradeoff(risk_frame(WIDE), logx="yes")
    with pytest.raises(ConfigError, match="logx: no setting has a positive false_expiry_rate"):
        plots.tradeoff(risk_frame([0.0, 0.0]), logx=True)


def test_metric_table_errors_are_one_line():
    with pytest.raises(ConfigError, match="policy.nope: not a column"):
        plots.heatmap(hand_grid(), x="policy.nope")
    with pytest.raises(ConfigError, match="neither"):
        plots.heatmap(hand_grid(), value="throughput_per_s")
    duplicated = pd.concat([hand_grid(), hand_grid()])
    with pytest.raises(ConfigError, match="several rows"):
        plots.heatmap(duplicated)
