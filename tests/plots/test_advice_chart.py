"""The advice's trade-off chart: risk on a log axis with the 95% upper bounds drawn (no setting
"drawn as 0" because its risk is small), labels that do not overlap once rendered, the
recommendation starred, infeasible settings faded, and a TTL range that reaches a feasible setting
on every line that has one."""

from __future__ import annotations

import itertools

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.text import Text  # noqa: E402

from sim import teaching  # noqa: E402
from sim.advice.advisor import advise  # noqa: E402
from sim.plots import advice_chart  # noqa: E402
from sim.plots.advice import chart_frame, chart_heartbeats, chart_ttls  # noqa: E402

pytestmark = pytest.mark.slow  # an advice with its evidence sweep: make test only


@pytest.fixture(scope="module")
def advice():
    return advise("sample", arrival_rate=1.0, verify=False)


@pytest.fixture(scope="module")
def chart(advice):
    """The chart as notebook 06 and the report draw it (sim.plots.advice_chart): no heartbeat and
    the recommended one, at the recommended watcher interval, and the named settings."""
    frame = chart_frame(advice)
    fig = Figure(figsize=(10, 6.2), layout="constrained")
    FigureCanvasAgg(fig)  # rendered as the report and savefig render it
    ax = advice_chart(advice, fig.add_subplot())
    fig.canvas.draw()
    return frame, ax


def test_the_frame_keeps_every_risk_and_its_upper_bound(advice, chart):
    frame, _ = chart
    keys = ["ttl", "heartbeat_interval", "watcher_interval"]
    named = advice.shortlist.set_index("name")
    rows = advice.candidates.set_index(keys)
    for r in frame.itertuples():
        h = np.nan if r._2 == "none" else float(r._2.removesuffix(" s"))
        # a named setting is its own row (a queue's timeout may lie between the TTLs searched)
        row = named.loc[r.name] if r.name else rows.loc[(r._1, h, r._9)]
        assert (row["ttl"] if r.name else r._1) == r._1
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
    boxes = [Text.get_window_extent(t, renderer) for t in labels]  # the words; leaders may cross
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


def test_the_recommendation_is_starred_where_its_prediction_is(advice, chart):
    _, ax = chart
    stars = [c for c in ax.collections if c.get_gid() == "mark"]
    assert len(stars) == 1
    x, y = stars[0].get_offsets()[0]
    assert (x, y) == pytest.approx(
        (advice.predicted_false_expiry, advice.predicted_recovery_mean), rel=1e-12
    )
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert f"A (recommended): TTL {advice.ttl:g} s, hb {advice.heartbeat_interval:g} s" in legend


def test_every_named_setting_is_on_the_chart_under_its_letter(advice, chart):
    """The chart names the settings the text, the tables and the evidence name: each letter once,
    labelled beside its own point (its prediction), wherever its heartbeat or watcher is."""
    frame, ax = chart
    labels = {
        t.get_text().split(":")[0]: t
        for t in ax.texts
        if t.get_gid() == "point-label" and t.get_text()[1:2] == ":"
    }
    assert sorted(labels) == sorted(advice.shortlist["name"])
    for row in advice.shortlist.itertuples():
        text = labels[row.name]
        assert text.xy == pytest.approx((row.predicted_false_expiry, row.predicted_recovery_mean))
        assert text.get_text().startswith(f"{row.name}: TTL {row.ttl:g} s, hb ")


def test_infeasible_settings_are_faded_and_feasible_ones_are_not(chart):
    frame, ax = chart
    faded = [c for c in ax.collections if c.get_gid() == "point-infeasible"]
    solid = [c for c in ax.collections if c.get_gid() == "point"]
    assert len(faded) == 1 and len(solid) == 1
    assert len(faded[0].get_offsets()) == int((~frame["feasible"]).sum()) > 0
    assert len(solid[0].get_offsets()) == int(frame["feasible"].sum()) > 0
    assert "faded: not feasible" in [t.get_text() for t in ax.get_legend().get_texts()]


def test_the_range_reaches_the_first_feasible_ttl_of_every_line():
    """The issue's case in our own numbers: 10% of 4000 jobs around 100 s, target 1%. Without a
    heartbeat the first feasible TTL is 180 s; a chart stopping at 120 s would show that line as
    never feasible. The range goes one step past it."""
    rng = np.random.default_rng(5)
    slow = rng.random(4000) < 0.1
    durations = np.where(
        slow, rng.lognormal(np.log(100), 0.3, 4000), rng.lognormal(np.log(2), 0.3, 4000)
    )
    advice = advise(durations, target_false_expiry=0.01, verify=False)
    table = advice.candidates
    line = table[
        table["heartbeat_interval"].isna()
        & (table["watcher_interval"] == advice.watcher_interval)
        & table["feasible"]
    ]
    first = line["ttl"].min()
    assert first == 180 and advice.ttl < 120
    ttls = chart_ttls(advice)
    assert max(ttls) == 300 and first in ttls
    frame = teaching.advice_frame(advice, heartbeats=chart_heartbeats(advice), ttls=ttls)
    for beat, points in frame.groupby("policy.heartbeat_interval"):
        assert points["feasible"].any(), beat
