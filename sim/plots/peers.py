"""The peer comparison figure: how fast each popular queue recovers a crashed job,
and at what cost."""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.patches import Patch

from sim.errors import ConfigError
from sim.plots.style import ANNOTATION_PT, INK, METRIC_LABELS, finish, format_value, new_axes
from sim.support.in_words import count, duration

# ---- peers ---------------------------------------------------------------------------------------

RECOVERY_STYLES = {  # sim.comparisons.peers.recovery_mechanism -> (colour, hatch, legend text)
    "watcher requeues": ("#0072B2", "", "a watcher requeues the expired job"),
    "claim takes expired": ("#E69F00", "////", "the claim itself takes the expired job"),
    "watcher fails the job": ("#CC79A7", "xxxx", "the expired job is failed, not re-run"),
    "process prune requeues": ("#009E73", "\\\\", "a dead process's jobs are requeued"),
    "process prune fails the job": ("#D55E00", "++", "a dead process's jobs are failed"),
    "none": ("#999999", "....", "nothing recovers it"),
}
PEER_COLUMNS = (  # (metric, header) printed to the right of peer_comparison's bars
    ("crashed_jobs", "crashed\njobs"),
    ("false_expiries", "false\nexpiries"),
    ("double_processed_jobs", "jobs run\ntwice"),
    ("duplicate_external_effects", "dup. PSP\ncharges"),
    ("duplicate_db_effects", "dup. ledger\nrows"),
    ("statements_per_s", "DB load\nall stmt/s"),
    ("recovery_statements_per_s", "heartbeat +\nwatcher\nstmt/s"),
)
_TIME_TICKS = (
    (1, "1 s"),
    (10, "10 s"),
    (60, "1 min"),
    (300, "5 min"),
    (900, "15 min"),
    (3600, "1 h"),
    (4 * 3600, "4 h"),
    (24 * 3600, "1 day"),
)


def peer_settings(row) -> str:
    """'lease 1 h, no heartbeat, watcher 30 s' from a compare_peers row; a process-liveness peer
    reads 'process beat 4 s, stale 30 s, ...' and an execution timeout is named."""
    beat = row.get("heartbeat_interval", np.nan)
    watch = row.get("watcher_interval", np.nan)
    process = row.get("process_heartbeat_interval", np.nan)
    timeout = row.get("execution_timeout", np.nan)
    if np.isfinite(process):
        parts = [f"process beat {duration(process)}, stale {duration(row['process_stale_after'])}"]
    else:
        parts = [
            f"lease {duration(row['lease_ttl'])}",
            "no heartbeat" if not np.isfinite(beat) else f"heartbeat {duration(beat)}",
        ]
    if np.isfinite(timeout) and timeout < row["lease_ttl"]:
        parts.append(f"timeout {duration(timeout)}")
    parts.append("no watcher" if not np.isfinite(watch) else f"watcher {duration(watch)}")
    return ", ".join(parts)


def peer_comparison(
    frame: pd.DataFrame, ax=None, *, metric: str = "recovery_latency_mean", columns=PEER_COLUMNS
):
    """One bar per peer (sim.comparisons.peers.compare_peers): `metric` on a log time axis, CI
    whiskers, hatched by how the peer recovers an expired lease; per-run means of `columns` on the
    right."""
    needed = {"label", "recovery", "lease_ttl", f"{metric}_mean"}
    if not needed <= set(frame.columns):
        raise ConfigError(
            "peer_comparison: expected a sim.comparisons.peers.compare_peers frame with "
            f"{', '.join(sorted(needed))}"
        )
    # the columns sit right of the axes at fixed offsets in inches; constrained layout makes room
    legend_rows = 2.0  # empty rows under the last bar, where the legend sits
    ax = new_axes(ax, (10 + 0.8 * len(columns), 1.6 + 0.75 * (len(frame) + legend_rows)))
    rows = frame.reset_index(drop=True)
    means = rows[f"{metric}_mean"].to_numpy(dtype=float)
    low = rows.get(f"{metric}_ci_low", pd.Series(np.nan, index=rows.index)).to_numpy(dtype=float)
    high = rows.get(f"{metric}_ci_high", pd.Series(np.nan, index=rows.index)).to_numpy(dtype=float)
    finite = means[np.isfinite(means)]
    left = max(0.5, 10 ** np.floor(np.log10(finite.min() / 2))) if len(finite) else 1.0
    right = (np.nanmax(np.r_[finite, high[np.isfinite(high)]]) * 4) if len(finite) else 3600.0
    seen: dict[str, object] = {}
    for y, row in rows.iterrows():
        colour, hatch, text = RECOVERY_STYLES.get(row["recovery"], RECOVERY_STYLES["none"])
        seen.setdefault(text, Patch(facecolor=colour, hatch=hatch, edgecolor=INK, lw=0.7))
        if np.isfinite(means[y]):
            _draw_bar(ax, y, (means[y], low[y], high[y]), left, colour, hatch)
        else:
            _draw_no_bar(ax, y, row, left, colour)
    _time_axis(ax, left, right)
    ax.set_ylim(len(rows) - 0.5 + legend_rows, -0.5)
    ax.set_yticks(
        range(len(rows)),
        [f"{r['label']}\n{peer_settings(r)}" for _, r in rows.iterrows()],
        fontsize=ANNOTATION_PT,
    )
    ax.tick_params(axis="y", length=0)
    name = METRIC_LABELS.get(metric, (metric,))[0]
    ax.set_xlabel(f"{name}: the owner crashes -> another worker claims the job (log scale)")
    _draw_columns(ax, rows, columns)
    n = rows["n"].dropna() if "n" in rows else pd.Series(dtype=float)
    seeds = f"{count(int(n.min()), 'seed')} per peer" if len(n) else "seeds: not given"
    confidence = frame.attrs.get("confidence", 0.95)
    finish(
        ax,
        f"Peer queues' default recovery settings on one payment workload: {name}",
        f"{seeds}; whiskers: {confidence:.0%} CI of the mean; right: means per run",
    )
    ax.grid(axis="y", visible=False)
    ax.legend(
        list(seen.values()),
        list(seen),
        loc="lower right",
        fontsize=ANNOTATION_PT,
        frameon=True,
        framealpha=0.9,
        title="how an expired lease comes back",
        title_fontsize=ANNOTATION_PT,
    )
    return ax


def _draw_bar(ax, y: int, interval: tuple[float, float, float], left: float, colour, hatch) -> None:
    """A peer's bar from the axis' left edge to its mean, its CI whisker, and the mean in words."""
    mean, low, high = interval
    ax.barh(
        y,
        mean - left,
        left=left,
        height=0.62,
        color=colour,
        hatch=hatch,
        edgecolor=INK,
        lw=0.7,
        zorder=3,
        gid="bar",
    )
    end = mean
    if np.isfinite(low) and np.isfinite(high) and high > low:
        ax.plot(
            [max(low, left), high],
            [y, y],
            color=INK,
            lw=1.2,
            marker="|",
            ms=9,
            mew=1.2,
            zorder=4,
            gid="ci",
        )
        end = max(end, high)
    ax.text(
        end * 1.12,
        y,
        duration(mean),
        va="center",
        ha="left",
        fontsize=ANNOTATION_PT,
        color=INK,
        zorder=5,
        gid="bar-label",
    )


def _draw_no_bar(ax, y: int, row, left: float, colour) -> None:
    """A peer that never re-runs a crashed job: a dashed note instead of a bar."""
    detected = row.get("detection_latency_mean_mean", np.nan)
    note = "never re-run"
    if row["recovery"] in ("watcher fails the job", "process prune fails the job"):
        note += (
            f": the crashed job is marked failed after ~{duration(detected)}"
            if np.isfinite(detected)
            else ": the crashed job is marked failed"
        )
    ax.text(
        left * 1.15,
        y,
        note,
        va="center",
        ha="left",
        fontsize=ANNOTATION_PT,
        color=INK,
        style="italic",
        zorder=5,
        gid="no-bar",
        bbox={
            "boxstyle": "square,pad=0.3",
            "facecolor": "white",
            "edgecolor": colour,
            "ls": "--",
            "lw": 1.2,
        },
    )


def _time_axis(ax, left: float, right: float) -> None:
    """A log time axis from `left` to `right`, ticked at round durations (1 s ... 1 day)."""
    from matplotlib.ticker import FixedLocator, NullLocator

    ax.set_xscale("log")
    ax.set_xlim(left, right)
    ticks = [(t, s) for t, s in _TIME_TICKS if left <= t <= right]
    ax.xaxis.set_major_locator(FixedLocator([t for t, _ in ticks]))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xticklabels([s for _, s in ticks])


def _draw_columns(ax, rows: pd.DataFrame, columns) -> None:
    """Each of `columns`' per-run means as a column of text right of the axes, under its header."""
    from matplotlib.transforms import ScaledTranslation, blended_transform_factory

    edge = blended_transform_factory(ax.transAxes, ax.transData)
    for k, (column, header) in enumerate(columns):
        shift = ScaledTranslation(0.5 + 0.8 * k, 0, ax.figure.dpi_scale_trans)
        ax.text(
            1.0,
            -0.62,
            header,
            transform=edge + shift,
            ha="center",
            va="bottom",
            fontsize=ANNOTATION_PT,
            fontweight="bold",
            color=INK,
            gid="column-header",
        )
        values = rows.get(f"{column}_mean", pd.Series(np.nan, index=rows.index))
        for y, value in enumerate(values):
            ax.text(
                1.0,
                y,
                format_value(column, value),
                transform=edge + shift,
                ha="center",
                va="center",
                fontsize=ANNOTATION_PT,
                color=INK,
                gid="cell-text",
            )
