"""The advice's trade-off chart: risk on a log axis with the 95% upper bounds drawn (no setting
"drawn as 0" because its risk is small), and labels that do not overlap once rendered."""

from __future__ import annotations

import itertools

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from sim import teaching  # noqa: E402
from sim.advisor import advise  # noqa: E402
from sim.plots import tradeoff  # noqa: E402


@pytest.fixture(scope="module")
def advice():
    return advise("sample", arrival_rate=1.0, verify=False)


@pytest.fixture(scope="module")
def chart(advice):
    """The chart as notebook 06 and the report draw it: no heartbeat and the recommended one."""
    ttls = [t for t in advice.inputs["searched"]["ttl"] if t <= max(120, 4 * advice.ttl)]
    frame = teaching.advice_frame(advice, heartbeats=[None, advice.heartbeat_interval], ttls=ttls)
    fig = Figure(figsize=(10, 6.2), layout="constrained")
    FigureCanvasAgg(fig)  # rendered as the report and savefig render it
    ax = tradeoff(frame.drop(columns="feasible"), fig.add_subplot(), **teaching.ADVICE_AXES)
    fig.canvas.draw()
    return frame, ax


def test_the_frame_keeps_every_risk_and_its_upper_bound(advice, chart):
    frame, _ = chart
    rows = advice.candidates.set_index(["ttl", "heartbeat_interval", "watcher_interval"])
    for r in frame.itertuples():
        h = np.nan if r._2 == "none" else float(r._2.removesuffix(" s"))
        row = rows.loc[(r._1, h, advice.watcher_interval)]
        assert r.predicted_false_expiry_mean == row["predicted_false_expiry"]  # not floored to 0
        assert r.predicted_false_expiry_ci_high == row["predicted_false_expiry_high"]
        assert r.predicted_false_expiry_ci_low == row["predicted_false_expiry"]
    assert (frame["predicted_false_expiry_mean"] > 0).all()


def test_risk_is_on_a_log_axis_with_whiskers_to_the_upper_bounds(chart):
    frame, ax = chart
    assert ax.get_xscale() == "log"
    assert not any(line.get_gid() == "zero-line" for line in ax.lines)  # nothing drawn as 0
    whiskers = sorted(
        tuple(np.round(line.get_xdata(), 15))
        for line in ax.lines
        if line.get_gid() == "ci" and line.get_xdata()[0] != line.get_xdata()[1]
    )
    expected = sorted(
        (round(lo, 15), round(hi, 15))
        for lo, hi in zip(
            frame["predicted_false_expiry_ci_low"],
            frame["predicted_false_expiry_ci_high"],
            strict=True,
        )
        if hi > lo
    )
    assert whiskers == expected and len(whiskers) > 0
    low, high = ax.get_xlim()
    assert (
        low <= frame["predicted_false_expiry_mean"].min()
        and high >= frame["predicted_false_expiry_ci_high"].max()
    )
    assert "95% upper bound" in ax.get_title(loc="left") + " ".join(
        t.get_text() for t in ax.texts
    ) + " ".join(t.get_text() for t in ax.get_legend().get_texts())


def test_labels_do_not_overlap_each_other_or_the_legend_and_stay_in_the_axes(chart):
    _, ax = chart
    fig = ax.figure
    renderer = fig.canvas.get_renderer()
    labels = [t for t in ax.texts if t.get_gid() == "point-label"]
    assert len(labels) >= 5
    boxes = [t.get_window_extent(renderer) for t in labels]
    overlapping = [
        (labels[a].get_text(), labels[b].get_text())
        for a, b in itertools.combinations(range(len(boxes)), 2)
        if boxes[a].overlaps(boxes[b])
    ]
    assert overlapping == []
    legend = ax.get_legend().get_window_extent(renderer)
    assert not [t.get_text() for t, box in zip(labels, boxes, strict=True) if box.overlaps(legend)]
    frame = ax.get_window_extent(
        renderer
    )  # inside the axes: clear of the colour bar and the tick labels
    assert all(
        frame.x0 <= b.x0 and b.x1 <= frame.x1 and frame.y0 <= b.y0 and b.y1 <= frame.y1
        for b in boxes
    )
