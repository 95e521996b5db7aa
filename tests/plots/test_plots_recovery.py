"""sim.plots.recovery: notebook 04's figure, out of the notebook (issue 15)."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest

from sim.plots import ANNOTATION_PT, claim_takes_expired, label_log_axis, watcher_cost


@pytest.fixture
def agg():
    ws = [5.0, 30.0, 120.0]
    return pd.DataFrame(
        {"policy.watcher_interval": ws, "db_requeue_expired_per_s_mean": [1 / w for w in ws]}
    )


def test_watcher_cost_plots_1_over_w_and_says_what_it_counts(agg):
    ax = watcher_cost(agg, latency=0.002, baseline=12.0)
    simulated, theory, baseline = (
        next(line for line in ax.get_lines() if line.get_gid() == gid)
        for gid in ("simulated", "theory", "baseline")
    )
    assert list(simulated.get_ydata()) == pytest.approx([0.2, 1 / 30, 1 / 120])
    x, y = theory.get_data()
    assert y[0] == pytest.approx(1 / (5.0 + 0.002)) and y[-1] == pytest.approx(1 / (120.0 + 0.002))
    assert list(baseline.get_ydata()) == [12.0, 12.0]
    title = ax.get_title(loc="left")
    assert title == "What the watcher costs: one statement per scan, 1 / W statements per second"
    assert "table size" not in title  # the figure never varies the table size
    assert [t.get_text() for t in ax.get_xticklabels()] == ["5", "30", "120"]  # not 6x10^0
    assert all(t.get_fontsize() >= ANNOTATION_PT >= 9 for t in ax.get_legend().get_texts())
    plt.close(ax.figure)


def test_claim_takes_expired_draws_mean_band_and_theory():
    row = pd.Series(
        {
            "recovery_latency_mean_mean": 24.7,
            "recovery_latency_mean_ci_low": 22.0,
            "recovery_latency_mean_ci_high": 27.4,
        }
    )
    ax = claim_takes_expired(row, 26.0)
    lines = {line.get_gid(): line for line in ax.get_lines()}
    assert list(lines["claim-simulated"].get_ydata()) == [24.7, 24.7]
    assert list(lines["claim-theory"].get_ydata()) == [26.0, 26.0]
    (band,) = [p for p in ax.patches if p.get_gid() == "claim-ci"]
    ys = band.get_transform().transform(band.get_path().vertices)[:, 1]
    data_ys = ax.transData.inverted().transform(np.column_stack([np.zeros_like(ys), ys]))[:, 1]
    assert (data_ys.min(), data_ys.max()) == pytest.approx((22.0, 27.4))
    plt.close(ax.figure)
    row["recovery_latency_mean_ci_low"] = np.nan  # one replication: no band, still the lines
    ax = claim_takes_expired(row, 26.0)
    assert not [p for p in ax.patches if p.get_gid() == "claim-ci"]
    plt.close(ax.figure)


def test_label_log_axis_plain_numbers():
    _, ax = plt.subplots()
    ax.plot([5, 20, 80], [1e-1, 1e-2, 1e-6])
    ax.set_xscale("log")
    label_log_axis(ax.xaxis, [5, 20, 80, 20])
    ax.figure.canvas.draw()
    assert [t.get_text() for t in ax.get_xticklabels()] == ["5", "20", "80"]
    assert ax.xaxis.get_minorticklabels() == [] or all(
        not t.get_text() for t in ax.xaxis.get_minorticklabels()
    )
    plt.close(ax.figure)
