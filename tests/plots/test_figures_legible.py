"""Figures read at a glance (issue 15): no duplicated title words, no text below ANNOTATION_PT
(9 pt), plain numbers on the log TTL axis of 03 instead of 6x10^0-style minor labels."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from matplotlib.text import Text  # noqa: E402

import sim  # noqa: E402
from sim import plots, teaching  # noqa: E402
from sim.plots import ANNOTATION_PT  # noqa: E402


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def small_texts(fig) -> list[tuple[str, float]]:
    """Visible non-empty texts of a drawn figure smaller than ANNOTATION_PT."""
    fig.canvas.draw()
    return [
        (t.get_text(), t.get_fontsize())
        for t in fig.findobj(Text)
        if t.get_visible() and t.get_text().strip() and t.get_fontsize() < ANNOTATION_PT
    ]


@pytest.fixture(scope="module")
def crash():
    return sim.run(teaching.one_job(crash_at=12.0, seed=1))


def test_annotation_size_is_at_least_9_pt():
    assert ANNOTATION_PT >= 9


def test_a_one_job_timeline_title_does_not_repeat_lease(crash):
    ax = plots.lease_timeline(crash)
    first = ax.get_title(loc="left").splitlines()[0]
    assert first == "lease timeline"  # not "lease: lease timeline"
    lock = plots.lease_timeline(sim.run(teaching.one_job(crash_at=12.0, lock=True, seed=1)))
    assert lock.get_title(loc="left").splitlines()[0] == "lock timeline"
    named = plots.lease_timeline(
        sim.run(teaching.one_job(crash_at=12.0, seed=1, name="with a LEASE"))
    )
    assert named.get_title(loc="left").splitlines()[0] == "with a LEASE: lease timeline"
    clock = plots.lease_clock(crash)
    assert clock.get_title(loc="left").startswith("time left on each lease of job 1")


def test_timeline_and_clock_text_is_legible(crash):
    ax = plots.lease_timeline(crash)
    labels = [t.get_text() for t in ax.texts]
    assert "j1 #2" in labels and any(
        t.startswith("recovery") for t in labels
    )  # bar label and recovery arrow
    assert small_texts(ax.figure) == []
    assert small_texts(plots.lease_clock(crash).figure) == []


def test_03_false_expiry_ttl_axis_reads_plain_numbers_in_fast_mode():
    """03's fast sweep (TTL 5, 20, 80 s) spans about one decade: matplotlib would label minor
    ticks 6x10^0, 2x10^1, ...; the axis names the swept TTLs instead."""
    table = pd.DataFrame(
        {
            "policy.heartbeat": [False, False, False, True, True, True],
            "policy.lease_ttl": [5.0, 20.0, 80.0] * 2,
            "false_expiries": [135, 24, 2, 5, 0, 0],
            "leases": [300] * 6,
            "rate": [0.45, 0.08, 0.0067, 0.0167, 0.0, 0.0],
            "low": [0.39, 0.054, 0.0018, 0.007, 0.0, 0.0],
            "high": [0.51, 0.12, 0.024, 0.038, 0.0127, 0.0127],
        }
    )
    ax = teaching.plot_false_expiry(table, teaching.stalling_queue())
    ax.figure.canvas.draw()
    assert [t.get_text() for t in ax.get_xticklabels()] == ["5", "20", "80"]
    assert not [t.get_text() for t in ax.xaxis.get_minorticklabels() if t.get_text()]
    assert small_texts(ax.figure) == []


def test_contention_figure_is_legible():
    frame = teaching.claim_contention(
        strategies=("conditional_update", "skip_locked"), workers=(4, 8), jobs=40
    )
    axes = teaching.plot_contention(frame)
    assert small_texts(axes[0].figure) == []
