"""The trade-off (Pareto) chart of settings: recovery latency against false-expiry risk, marker
size and shade for DB load; the frontier circled and joined, confidence whiskers, a log risk axis
that keeps zero on a dotted line, one setting starred (a recommendation), infeasible ones faded,
named ones (an advice's A, B, C ...) always labelled; labels placed so that they do not overlap.

Takes a sweep's runs or aggregate (see sim.plots.analysis) or an advice's candidates shaped like
one (sim.plots.advice.advice_frame).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
from matplotlib.colors import Normalize
from matplotlib.lines import Line2D
from matplotlib.text import Text

from sim.errors import ConfigError
from sim.plots.analysis import metric_table
from sim.plots.style import (
    ANNOTATION_PT,
    INK,
    METRIC_LABELS,
    PALETTE,
    finish,
    is_percent,
    metric_label,
    n_text,
    new_axes,
    setting_text,
)

if TYPE_CHECKING:
    from matplotlib.transforms import Bbox


# ---- the trade-off: recovery latency vs false-expiry risk, sized by DB load ---------------------


def pareto_front(x, y) -> np.ndarray:
    """Boolean mask of the points no other point beats on both x and y
    (lower is better; NaN: never)."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    ok = np.isfinite(x) & np.isfinite(y)
    front = ok.copy()
    for i in np.flatnonzero(ok):
        better = ok & (x <= x[i]) & (y <= y[i]) & ((x < x[i]) | (y < y[i]))
        front[i] = not better.any()
    return front


LOG_DECADES = (
    2.0  # tradeoff(logx=None) turns to a log x axis when positive x values span more decades
)


def tradeoff(
    agg: pd.DataFrame,
    ax=None,
    *,
    x: str = "false_expiry_rate",
    y: str = "recovery_latency_mean",
    size: str = "statements_per_s",
    keys: list[str] | None = None,
    confidence: float = 0.95,
    logx: bool | None = None,
    whiskers: str = "grey whiskers: 95% CIs",
    mark: dict | None = None,
    mark_label: str = "recommended",
    feasible: str | None = None,
    named_by: str | None = None,
    label_keys: list[str] | None = None,
):
    """The Pareto chart of settings: recovery latency vs false-expiry risk, marker size and
    shade = DB load.

    Each point is one setting (a row of a sweep's aggregate, identified by its dotted grid keys or
    `keys`), labelled with those settings. The frontier (settings no other setting beats on both
    axes) is circled and joined by a dashed staircase; whiskers show CIs when the frame has them.
    logx: a log x axis; None (default) chooses one when the positive x values span more than two
    decades. A log axis has no 0, so settings with x = 0 (and intervals reaching 0) are drawn on a
    dotted line at its left edge, labelled 0 on the axis and in the legend, rather than dropped;
    the frontier is computed on the true values. mark: {key: value} of one setting to mark with a
    star (`mark_label` in the legend), e.g. a recommendation; feasible: a boolean column of the
    frame, whose False settings are drawn faded and named so in the legend. named_by: a column of
    short names ("A", "B", or ""): a named setting is always labelled, "B: <its settings>", as the
    advice's text and tables name it; label_keys: the keys an unnamed point's label shows (all by
    default).
    """
    if logx is not None and not isinstance(logx, bool | np.bool_):
        raise ConfigError(f"logx: expected True, False or None (automatic), got {logx!r}")
    keys = keys if keys is not None else [c for c in agg.columns if isinstance(c, str) and "." in c]
    if not keys:
        raise ConfigError("tradeoff: the frame has no dotted grid-key columns; pass keys=[...]")
    points, ty = _point_table(agg, keys, (x, y, size), confidence, (feasible, named_by))
    chart = _Chart.of(points, x, logx, feasible)
    ax = new_axes(ax, (9, 6))
    if chart.log:
        ax.set_xscale("log")
    chart.draw_whiskers(ax)
    chart.draw_points(ax)
    marked = _marked(points, keys, mark) & chart.shown
    chart.draw_marks(ax, marked)
    front = chart.draw_frontier(ax)
    bar = ax.figure.colorbar(chart.colour_scale(), ax=ax, fraction=0.05, pad=0.02)
    bar.set_label(f"{metric_label(size)}: marker size and shade")
    log = chart.log
    ax.set_xlabel(metric_label(x) + "  (risk: lower is better" + ("; log scale)" if log else ")"))
    ax.set_ylabel(metric_label(y) + "  (lower is better)")
    ax.set_ylim(bottom=0)
    chart.set_x_limits(ax, x)
    _x_ticks(ax, x, log, chart.edge)
    legend = chart.legend(ax, x, marked, mark_label)
    finish(
        ax,
        "Trade-off: recovery latency vs false-expiry risk (bottom left is better)",
        f"each point is one setting; {n_text(ty)}"
        + (f"; {whiskers}" if any(a.get_gid() == "ci" for a in ax.lines) else ""),
    )
    # labels last: the title and the colour bar have moved the axes to where they will be drawn
    chart.label_points(ax, keys, front, named_by, label_keys, legend)
    return ax


def _point_table(
    agg: pd.DataFrame,
    keys: list[str],
    metrics: tuple[str, str, str],
    confidence: float,
    extras: tuple[str | None, ...],
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """One row per setting: the keys, mean/low/high of the x, y and size metrics (suffixed _x, _y,
    _s) and the `extras` columns; with the y metric's own table (whose n the subtitle gives)."""
    tx, ty, ts = (metric_table(agg, keys, metric, confidence) for metric in metrics)
    points = tx.rename(columns={c: f"{c}_x" for c in ("mean", "low", "high")})
    for table, tag in ((ty, "y"), (ts, "s")):
        points = points.merge(
            table.rename(columns={c: f"{c}_{tag}" for c in ("mean", "low", "high")}), on=keys
        )
    for extra in extras:
        if extra is not None:
            points = points.merge(agg[[*keys, extra]].drop_duplicates(keys), on=keys, how="left")
    return points, ty


@dataclass
class _Chart:
    """The settings as drawn: means, where each point sits on the x axis (dx: a log axis puts x <= 0
    on the dotted line at `edge`), which are shown and feasible, and marker areas and shades."""

    points: pd.DataFrame
    px: np.ndarray
    py: np.ndarray
    ps: np.ndarray
    dx: np.ndarray
    shown: np.ndarray
    ok: np.ndarray
    log: bool
    edge: float | None
    areas: np.ndarray
    norm: Normalize

    @classmethod
    def of(cls, points: pd.DataFrame, x: str, logx: bool | None, feasible: str | None) -> _Chart:
        """The chart of `points`; ConfigError when a log axis has no positive x to show."""
        px, py, ps = (points[c].to_numpy(dtype=float) for c in ("mean_x", "mean_y", "mean_s"))
        shown = np.isfinite(px) & np.isfinite(py)
        ok = (
            np.ones(len(points), bool)
            if feasible is None
            else points[feasible].fillna(False).to_numpy(bool)
        )
        log = _spans_decades(px[shown], LOG_DECADES) if logx is None else bool(logx)
        if log and not (px[shown] > 0).any():
            raise ConfigError(f"logx: no setting has a positive {x}; a log axis needs some")
        edge = (
            _zero_edge(px[shown], points.loc[shown, ["low_x", "high_x"]].to_numpy(dtype=float))
            if log
            else None
        )
        dx = np.where(px > 0, px, edge) if edge is not None else px  # where each point is drawn
        finite_s = ps[np.isfinite(ps)]
        s_low, s_high = (finite_s.min(), finite_s.max()) if len(finite_s) else (0.0, 1.0)
        if s_high <= s_low:
            s_high = s_low + (abs(s_low) * 0.1 or 1.0)
        areas = 40 + 360 * np.clip((np.nan_to_num(ps, nan=s_low) - s_low) / (s_high - s_low), 0, 1)
        return cls(points, px, py, ps, dx, shown, ok, log, edge, areas, Normalize(s_low, s_high))

    def colour_scale(self):
        """The colour bar's mappable: DB load on the cividis map."""
        import matplotlib as mpl

        return mpl.cm.ScalarMappable(norm=self.norm, cmap=mpl.colormaps["cividis"])

    def draw_whiskers(self, ax) -> None:
        """Grey CI whiskers in y and x (on a log axis an interval reaching 0 ends on the line)."""
        points, dx, py = self.points, self.dx, self.py
        for i in np.flatnonzero(self.shown):
            if np.isfinite(points["low_y"].iat[i]) and np.isfinite(points["high_y"].iat[i]):
                ax.plot(
                    [dx[i]] * 2,
                    [points["low_y"].iat[i], points["high_y"].iat[i]],
                    color="#b0b0b0",
                    lw=0.8,
                    zorder=1,
                    gid="ci",
                )
            if np.isfinite(points["low_x"].iat[i]) and np.isfinite(points["high_x"].iat[i]):
                ends = [points["low_x"].iat[i], points["high_x"].iat[i]]
                if self.log:  # an interval reaching 0 reaches the dotted line
                    ends = [v if v > 0 else self.edge for v in ends]
                ax.plot(ends, [py[i]] * 2, color="#b0b0b0", lw=0.8, zorder=1, gid="ci")

    def draw_points(self, ax) -> None:
        """The feasible settings, then the infeasible ones faded."""
        import matplotlib as mpl

        shown, ok = self.shown, self.ok
        for keep, alpha, gid in (
            (shown & ok, 0.9, "point"),
            (shown & ~ok, 0.3, "point-infeasible"),
        ):
            if keep.any():
                ax.scatter(
                    self.dx[keep],
                    self.py[keep],
                    s=self.areas[keep],
                    c=self.ps[keep],
                    cmap=mpl.colormaps["cividis"],
                    norm=self.norm,
                    edgecolors=INK,
                    linewidths=0.7,
                    alpha=alpha,
                    zorder=3,
                    gid=gid,
                )

    def draw_marks(self, ax, marked: np.ndarray) -> None:
        """A star on each marked setting."""
        for i in np.flatnonzero(marked):
            ax.scatter(
                [self.dx[i]],
                [self.py[i]],
                s=self.areas[i] + 420,
                marker="*",
                facecolors=PALETTE[5],
                edgecolors=INK,
                linewidths=1.0,
                zorder=5,
                gid="mark",
            )

    def draw_frontier(self, ax) -> np.ndarray:
        """Circle the Pareto frontier (on the true values) and join it by a dashed staircase;
        returns its mask."""
        px, dx, py = self.px, self.dx, self.py
        front = pareto_front(px, py)
        order = np.flatnonzero(front)[np.argsort(px[front], kind="stable")]
        if len(order):
            ax.plot(
                dx[order],
                py[order],
                drawstyle="steps-post",
                color=INK,
                ls="--",
                lw=1.2,
                zorder=2,
                gid="frontier",
            )
            ax.scatter(
                dx[order],
                py[order],
                s=self.areas[order] + 160,
                facecolors="none",
                edgecolors=INK,
                linewidths=1.8,
                zorder=4,
                gid="frontier-point",
            )
        return front

    def set_x_limits(self, ax, x: str) -> None:
        """x limits with room on the right for the labels (a share stops near 100%)."""
        shown, dx, px = self.shown, self.dx, self.px
        if not shown.any():
            return
        if self.log:
            ends = self.points.loc[shown, "high_x"].to_numpy(dtype=float)
            right = max(dx[shown].max(), np.nanmax(ends) if np.isfinite(ends).any() else 0.0)
            low, high = np.log10(min(dx[shown].min(), self.edge or np.inf)), np.log10(right)
            span = max(high - low, 1.0)
            top = 10 ** (high + 0.24 * span)
            ax.set_xlim(
                10 ** (low - 0.06 * span), min(top, 3.0) if is_percent(x) else top
            )  # a share is <= 100%
        else:
            ax.set_xlim(
                min(0.0, px[shown].min()) - _pad(px[shown]), px[shown].max() + 4 * _pad(px[shown])
            )

    def legend(self, ax, x: str, marked: np.ndarray, mark_label: str):
        """The frontier's legend, the star, faded settings and the dotted zero line when drawn
        (the line itself is drawn here)."""
        handles = [
            Line2D([], [], ls="none", marker="o", ms=13, mfc="none", mec=INK, mew=1.8),
            Line2D([], [], color=INK, ls="--", lw=1.2),
        ]
        names = ["Pareto frontier: no other setting is better on both axes", "frontier staircase"]
        if marked.any():
            handles.append(
                Line2D([], [], ls="none", marker="*", ms=15, mfc=PALETTE[5], mec=INK, mew=1.0)
            )
            names.append(mark_label)
        if (self.shown & ~self.ok).any():
            handles.append(Line2D([], [], ls="none", marker="o", ms=9, mfc="#999999", alpha=0.3))
            names.append("faded: not feasible")
        if self.edge is not None:
            ax.axvline(self.edge, color="#888888", ls=":", lw=1.2, zorder=1, gid="zero-line")
            handles.append(Line2D([], [], color="#888888", ls=":", lw=1.2))
            sign = "=" if (self.px[self.shown] >= 0).all() else "<="
            names.append(
                f"on the dotted line: {METRIC_LABELS.get(x, (x.replace('_', ' '),))[0]} {sign} 0 "
                "(a log axis has no 0)"
            )
        return ax.legend(handles, names, fontsize=ANNOTATION_PT, frameon=False, loc="upper right")

    def label_points(
        self,
        ax,
        keys: list[str],
        front: np.ndarray,
        named_by: str | None,
        label_keys: list[str] | None,
        legend,
    ) -> None:
        """Label every setting (up to 24), else the frontier and the named ones; named labels
        read "B: <its settings>" and are placed first, in name order."""
        points, shown = self.points, self.shown
        label_all = shown.sum() <= 24
        named = (
            points[named_by].fillna("").astype(str).to_numpy()
            if named_by is not None
            else np.full(len(points), "")
        )
        chosen = [i for i in np.flatnonzero(shown) if label_all or front[i] or named[i]]
        texts = [
            f"{named[i]}: " + ", ".join(setting_text(k, points[k].iat[i]) for k in keys)
            if named[i]
            else ", ".join(setting_text(k, points[k].iat[i]) for k in (label_keys or keys))
            for i in chosen
        ]
        # named settings first, in name order (A, the recommendation, before all)
        first = np.array([named[i] or "~" for i in chosen])
        _place_labels(
            ax, self.dx[chosen], self.py[chosen], texts, front[chosen], avoid=[legend], first=first
        )


def _marked(points: pd.DataFrame, keys: list[str], mark: dict | None) -> np.ndarray:
    """Which points are the setting `mark` names ({key: value}); ConfigError for an unknown key."""
    if not mark:
        return np.zeros(len(points), bool)
    unknown = [k for k in mark if k not in keys]
    if unknown:
        raise ConfigError(f"mark: {unknown[0]!r} is not a key of the chart ({', '.join(keys)})")
    hit = np.ones(len(points), bool)
    for key, value in mark.items():
        column = points[key]
        if isinstance(value, float | int) and pd.api.types.is_numeric_dtype(column):
            hit &= np.isclose(column.to_numpy(float), float(value))
        else:
            hit &= (column == value).to_numpy(bool)
    return hit


def _spans_decades(values, decades: float) -> bool:
    """Whether the positive finite values span more than `decades` powers of ten."""
    values = np.asarray(values, dtype=float)
    positive = values[np.isfinite(values) & (values > 0)]
    return len(positive) >= 2 and positive.max() > positive.min() * 10**decades


def _zero_edge(means, interval_ends) -> float | None:
    """Where a log axis draws x <= 0: half a decade left of every positive mean and interval end
    (so that order is kept); None when no mean or interval reaches 0."""
    values = np.concatenate([np.ravel(means), np.ravel(interval_ends)]).astype(float)
    values = values[np.isfinite(values)]
    if not (values <= 0).any():
        return None
    return float(values[values > 0].min()) / 10**0.5


def _x_ticks(ax, metric: str, log: bool, edge: float | None) -> None:
    """Percent tick labels for rates. A log axis labels decades (also 2 and 5 when it spans fewer
    than two), and a dotted line for x = 0 at `edge` is labelled 0 instead of the ticks near it."""
    percent = is_percent(metric)
    if not log:
        if percent:
            from matplotlib.ticker import PercentFormatter

            ax.xaxis.set_major_formatter(PercentFormatter(1.0, decimals=None))
        return
    import matplotlib as mpl
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    low, high = ax.get_xlim()
    ax.xaxis.set_major_locator(LogLocator(subs=(1.0,) if high > 100 * low else (1.0, 2.0, 5.0)))
    cut = edge * 10**0.25 if edge is not None else 0.0  # halfway to the smallest positive value

    def label(v, _):
        return "" if v < cut else (f"{100 * v:.4g}%" if percent else f"{v:g}")

    ax.xaxis.set_major_formatter(FuncFormatter(label))
    ax.xaxis.set_minor_formatter(NullFormatter())
    if edge is not None:
        ax.annotate(
            "0%" if percent else "0",
            (edge, 0),
            xycoords=ax.get_xaxis_transform(),
            xytext=(0, -7),
            textcoords="offset points",
            ha="center",
            va="top",
            fontsize=mpl.rcParams["xtick.labelsize"],
            color=INK,
            gid="zero-label",
        )


def _place_labels(ax, xs, ys, texts, bold, avoid=(), first=None) -> None:
    """Label points to their right (or left, near the right edge). Each label is measured as drawn,
    after the layout is settled; one that would overlap a label already placed or an artist in
    `avoid` (the legend), or leave the axes, moves up or down a line at a time, nearest first,
    with a leader line to its point; a label with no free place within reach is left out. `first`:
    a sort key per label placed before the height (named settings, A first)."""
    if not len(texts):
        return
    fig = ax.figure
    renderer = _renderer(fig)
    frame = ax.get_window_extent(renderer)
    blocked = [artist.get_window_extent(renderer) for artist in avoid]
    placed: list[Bbox] = []
    where = ax.transData.transform(np.column_stack([xs, ys]))
    steps = [0] + [k for j in range(1, 41) for k in (j, -j)]
    ahead = np.zeros(len(texts)) if first is None else np.asarray(first)
    for i in np.lexsort((where[:, 1], ahead)):
        for k, side in ((k, side) for k in steps for side in (1, -1)):
            dy = 3.0 + (ANNOTATION_PT + 1.5) * k  # points: one line and a gap per step
            label = ax.annotate(
                texts[i],
                (xs[i], ys[i]),
                xytext=(10 * side, dy),
                textcoords="offset points",
                fontsize=ANNOTATION_PT,
                va="center",
                ha="left" if side > 0 else "right",
                fontweight="bold" if bold[i] else "normal",
                color=INK,
                zorder=5,
                gid="point-label",
                bbox={"boxstyle": "round,pad=0.12", "facecolor": "white", "alpha": 0.8, "lw": 0},
                arrowprops={
                    "arrowstyle": "-",
                    "color": "#999999",
                    "lw": 0.6,
                    "shrinkA": 0,
                    "shrinkB": 4,
                }
                if abs(dy) > 12
                else None,
            )
            label.set_in_layout(False)  # placed for this layout: it must not move the axes again
            label.update_positions(renderer)
            box = Text.get_window_extent(label, renderer)  # the words, not their leader line
            inside = (
                frame.x0 <= box.x0
                and box.x1 <= frame.x1
                and frame.y0 <= box.y0
                and box.y1 <= frame.y1
            )
            if inside and not any(box.overlaps(other) for other in placed + blocked):
                placed.append(box)
                break
            label.remove()


def _renderer(fig):
    """A renderer of `fig` with its layout done (constrained layout moves the axes once)."""
    fig.draw_without_rendering()
    canvas = fig.canvas
    return canvas.get_renderer() if hasattr(canvas, "get_renderer") else fig._get_renderer()


def _pad(values) -> float:
    finite = np.asarray(values, dtype=float)
    finite = finite[np.isfinite(finite)]
    if not len(finite):
        return 0.01
    span = finite.max() - finite.min()
    return 0.06 * span if span > 0 else 0.06 * (abs(finite.max()) or 1.0)
