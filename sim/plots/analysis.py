"""Analysis figures of sweeps: claims and charges per job by claim strategy, race probability,
recovery latency vs an interval (with the analytic curve), heatmap (TTL x heartbeat), and the
histogram of observed durations (the trade-off chart is sim.plots.tradeoff's).

These take DataFrames shaped like sim.sweep's: `SweepResult.runs` (one row per run: a column per
grid key named by its dotted key, `replication`, `seed`, the summary metrics) or
`SweepResult.aggregate()` (one row per grid point: the keys, `n`, `<metric>_mean`, `_ci_low`,
`_ci_high`). Given per-run rows they compute the mean and its CI themselves; rates the summary
does not carry (false_expiry_rate, race_probability, ...) come from sim.theory.stats.RATES.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
from matplotlib.patches import Rectangle

from sim.errors import ConfigError
from sim.plots.style import (
    ANNOTATION_PT,
    INK,
    KEY_LABELS,
    LINESTYLES,
    MARKERS,
    METRIC_LABELS,
    MULTIPLICITY,
    PALETTE,
    finish,
    format_value,
    is_percent,
    key_label,
    metric_label,
    n_text,
    new_axes,
    setting_text,
)
from sim.support.in_words import count

if TYPE_CHECKING:
    pass


def metric_table(
    frame: pd.DataFrame, keys: list[str], metric: str, confidence: float = 0.95
) -> pd.DataFrame:
    """`keys` + mean, low, high of `metric`, one row per key combination, sorted by the keys.

    Reads `<metric>_mean/_ci_low/_ci_high` of an aggregated frame, or averages per-run rows; a rate
    missing from an aggregated frame is the ratio of the means of its counts (no interval then).
    Every metric here is >= 0 and rates are <= 1, so the intervals are clipped to that range. `n`
    is the number of runs behind each row (NaN if the frame does not say).
    """
    from sim.theory.stats import RATES, add_rates, summarize

    missing = [k for k in keys if k not in frame.columns]
    if missing:
        raise ConfigError(
            f"{missing[0]}: not a column of the frame (columns: "
            f"{', '.join(map(str, frame.columns))})"
        )
    if f"{metric}_mean" in frame.columns:
        out = frame[keys].copy()
        out["n"] = frame["n"] if "n" in frame.columns else np.nan
        out["mean"] = frame[f"{metric}_mean"].astype(float)
        for side in ("low", "high"):
            column = f"{metric}_ci_{side}"
            out[side] = frame[column].astype(float) if column in frame.columns else np.nan
        if keys and out.duplicated(keys).any():
            raise ConfigError(
                f"{metric}: several rows per {', '.join(keys)}; filter the other grid keys first"
            )
    else:
        per_run = add_rates(frame)
        if metric in per_run.columns:
            agg = summarize(per_run, keys, [metric], confidence)
            out = agg[keys + ["n"]].copy()
            out["mean"], out["low"], out["high"] = (
                agg[f"{metric}_{s}"] for s in ("mean", "ci_low", "ci_high")
            )
        elif metric in RATES and all(f"{c}_mean" in frame.columns for c in RATES[metric]):
            num, den = RATES[metric]
            out = frame[keys].copy()
            out["n"] = frame["n"] if "n" in frame.columns else np.nan
            denominator = frame[f"{den}_mean"].astype(float)
            out["mean"] = frame[f"{num}_mean"].astype(float) / denominator.where(denominator > 0)
            out["low"] = out["high"] = np.nan
        else:
            raise ConfigError(
                f"{metric}: the frame has neither {metric}_mean nor per-run {metric} values"
            )
    out["low"] = out["low"].clip(lower=0.0)
    if is_percent(metric):
        out["high"] = out["high"].clip(upper=1.0)
    return out.sort_values(keys).reset_index(drop=True) if keys else out.reset_index(drop=True)


# ---- claims and charges per job, by claim strategy ---------------------------------------------


def multiplicity(run) -> dict[str, float]:
    """How many times each job was claimed, and each payment charged and booked (1.0 = exactly
    once).

    Averaged over the jobs (payments) that were claimed (charged, booked) at least once.
    """
    leases = run.leases.groupby("job").size()
    events = run.events
    charges = events[(events["kind"] == "psp_charge") & (events["detail"] == "new")]
    charges = charges.merge(run.jobs[["job", "event_id"]], on="job").groupby("event_id").size()
    ledger = run.table_ledger.groupby("event_id").size()
    mean = lambda s: float(s.mean()) if len(s) else np.nan  # noqa: E731
    return {
        "leases_per_job": mean(leases),
        "charges_per_payment": mean(charges),
        "ledger_rows_per_payment": mean(ledger),
    }


def double_processing(runs_by_strategy, ax=None, *, confidence: float = 0.95):
    """Grouped bars per claim strategy: leases per job, PSP charges and ledger rows per payment.

    `runs_by_strategy` maps a label (e.g. the claim strategy) to a Run or a list of Runs (the
    replications). Bars rise from the ideal 1.0 (exactly once), so their height is the excess;
    whiskers are the CI of the mean over replications.
    """
    if not hasattr(runs_by_strategy, "items") or not len(runs_by_strategy):
        raise ConfigError(
            "runs_by_strategy: expected a non-empty mapping of label -> Run or list of Runs"
        )
    from sim.theory.stats import mean_ci

    ax = new_axes(ax, (9, 4.8))
    labels, counts, tops = [], [], [1.0]
    width = 0.8 / len(MULTIPLICITY)
    for g, (label, runs) in enumerate(runs_by_strategy.items()):
        runs = [runs] if hasattr(runs, "leases") else list(runs)
        if not runs:
            raise ConfigError(f"runs_by_strategy[{label!r}]: no runs")
        values = [multiplicity(r) for r in runs]
        labels.append(f"{label}\n({count(len(runs), 'run')})")
        counts.append(len(runs))
        for k, (metric, (name, colour, hatch)) in enumerate(MULTIPLICITY.items()):
            mean, low, high, _ = mean_ci([v[metric] for v in values], confidence)
            if not np.isfinite(mean):
                continue
            x = g - 0.4 + width * (k + 0.5)
            bar = ax.bar(
                x,
                mean - 1.0,
                bottom=1.0,
                width=width * 0.92,
                color=colour,
                hatch=hatch,
                edgecolor=INK,
                lw=0.7,
                label=name if g == 0 else None,
                zorder=3,
            )
            for patch in bar.patches:
                patch.set_gid("bar")
            top = mean
            if np.isfinite(low) and high > low:
                ax.plot(
                    [x, x],
                    [low, high],
                    color=INK,
                    lw=1.1,
                    marker="_",
                    ms=7,
                    mew=1.1,
                    zorder=4,
                    gid="ci",
                )
                top = high
            ax.text(
                x,
                top,
                f"{mean:.2f}",
                ha="center",
                va="bottom",
                fontsize=ANNOTATION_PT,
                color=INK,
                zorder=5,
                gid="bar-label",
            )
            tops.append(top)
    ax.axhline(
        1.0, color=INK, ls="--", lw=1.2, zorder=2, gid="ideal", label="1.0 = exactly once (ideal)"
    )
    ax.set_xticks(range(len(labels)), labels)
    span = max(tops) - 1.0
    ax.set_ylim(1.0 - max(0.03, 0.08 * span), max(tops) + max(0.05, 0.12 * span))
    ax.set_ylabel("count per job or payment")
    ax.set_xlabel("claim strategy")
    whisk = f"whiskers: {confidence:.0%} CI of the mean" if max(counts) > 1 else "one run each"
    finish(
        ax,
        "Double processing by claim strategy: how often each job ran, was charged and booked",
        f"bars rise from 1.0 (exactly once): their height is the excess; {whisk}",
    )
    ax.grid(axis="x", visible=False)
    ax.legend(loc="upper right", fontsize=ANNOTATION_PT, frameon=False)
    return ax


# ---- race probability vs workers ---------------------------------------------------------------


def race_probability(
    frame: pd.DataFrame,
    ax=None,
    *,
    x: str = "policy.workers",
    by: str | None = "policy.select_to_update_gap",
    confidence: float = 0.95,
):
    """Double claims per lease vs `x` (workers), one line per `by` value (select-to-update gap).

    `frame`: per-run rows with double_claims and leases (or race_probability), or an aggregated
    frame with race_probability_mean (and _ci_low/_ci_high for the bands).
    """
    keys = [x] + ([by] if by else [])
    table = metric_table(frame, keys, "race_probability", confidence)
    ax = new_axes(ax, (8, 4.8))
    groups = list(table.groupby(by, sort=True)) if by else [(None, table)]
    banded = False
    for i, (value, group) in enumerate(groups):
        colour, marker, ls = (
            PALETTE[i % len(PALETTE)],
            MARKERS[i % len(MARKERS)],
            LINESTYLES[i % len(LINESTYLES)],
        )
        label = setting_text(by, value) if by else "simulated"
        ax.plot(
            group[x],
            100 * group["mean"],
            color=colour,
            marker=marker,
            ls=ls,
            lw=1.6,
            ms=6,
            mec=INK,
            mew=0.6,
            label=label,
            zorder=3,
            gid="line",
        )
        ci = group[["low", "high"]].notna().all(axis=1)
        if ci.any():
            ax.fill_between(
                group.loc[ci, x],
                100 * group.loc[ci, "low"],
                100 * group.loc[ci, "high"],
                color=colour,
                alpha=0.16,
                lw=0,
                zorder=2,
                gid="ci-band",
            )
            banded = True
    from matplotlib.ticker import MaxNLocator, PercentFormatter

    ax.yaxis.set_major_formatter(PercentFormatter(100, decimals=None))
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylim(bottom=0)
    ax.set_xlabel(key_label(x))
    ax.set_ylabel("race probability (double claims / leases)")
    band = f"; bands: {confidence:.0%} CI of the mean" if banded else ""
    finish(
        ax,
        "Read-then-write race: share of leases that were double claims",
        f"{n_text(table)}{band}",
    )
    if by:
        ax.legend(
            title=KEY_LABELS.get(by, (by,))[0],
            fontsize=ANNOTATION_PT,
            title_fontsize=ANNOTATION_PT,
            frameon=False,
            loc="upper left",
        )
    return ax


# ---- recovery latency vs an interval, with the theory -------------------------------------------


def recovery_vs_interval(
    agg: pd.DataFrame,
    x: str = "policy.watcher_interval",
    ax=None,
    theory=None,
    *,
    metric: str = "recovery_latency_mean",
    theory_label: str = "theory (sim.theory.closed_forms)",
    confidence: float = 0.95,
):
    """Simulated recovery latency (mean, CI band) vs `x` (watcher interval or TTL), beside the
    theory.

    `theory`: a callable x -> seconds (e.g. a lambda around
    sim.theory.closed_forms.recovery_latency_mean), drawn as a smooth dashed curve over the swept
    range; or precomputed values (a Series indexed by x, a dict, or a sequence aligned with the
    sorted x values).
    """
    table = metric_table(agg, [x], metric, confidence)
    ax = new_axes(ax, (8, 4.8))
    ci = table[["low", "high"]].notna().all(axis=1)
    if ci.any():
        ax.fill_between(
            table.loc[ci, x],
            table.loc[ci, "low"],
            table.loc[ci, "high"],
            color=PALETTE[0],
            alpha=0.18,
            lw=0,
            zorder=2,
            gid="ci-band",
            label=f"{confidence:.0%} CI of the mean",
        )
    ax.plot(
        table[x],
        table["mean"],
        color=PALETTE[0],
        marker="o",
        ms=6,
        mec=INK,
        mew=0.6,
        lw=1.6,
        zorder=3,
        gid="simulated",
        label="simulated",
    )
    if theory is not None:
        tx, ty = _theory_points(theory, table[x])
        ax.plot(
            tx, ty, color=PALETTE[5], ls="--", lw=1.8, zorder=4, gid="theory", label=theory_label
        )
    ax.set_ylim(bottom=0)
    ax.set_xlabel(key_label(x))
    ax.set_ylabel(metric_label(metric))
    what = METRIC_LABELS.get(metric, (metric,))[0]
    finish(
        ax,
        f"Recovery after a crash: {what} vs {KEY_LABELS.get(x, (x,))[0]}",
        f"crash of the owner -> the job claimed again; {n_text(table)}",
    )
    ax.legend(fontsize=ANNOTATION_PT, frameon=False, loc="upper left")
    return ax


def _theory_points(theory, xs: pd.Series):
    xs = np.asarray(xs, dtype=float)
    if callable(theory):
        grid = np.linspace(xs.min(), xs.max(), 200) if len(xs) > 1 else xs
        return grid, np.array([float(theory(v)) for v in grid])
    if isinstance(theory, pd.Series):
        ordered = theory.sort_index()
        return ordered.index.to_numpy(dtype=float), ordered.to_numpy(dtype=float)
    if hasattr(theory, "items"):
        pairs = sorted((float(k), float(v)) for k, v in theory.items())
        return np.array([k for k, _ in pairs]), np.array([v for _, v in pairs])
    values = np.asarray(theory, dtype=float)
    if values.shape != xs.shape:
        raise ConfigError(
            f"theory: expected a callable, a Series, a dict or {len(xs)} values, got {values.shape}"
        )
    return xs, values


# ---- heatmap of one metric over two settings ----------------------------------------------------


def heatmap(
    agg: pd.DataFrame,
    x: str = "policy.lease_ttl",
    y: str = "policy.heartbeat_interval",
    value: str = "false_expiry_rate",
    ax=None,
    *,
    cmap: str | None = None,
    confidence: float = 0.95,
):
    """One annotated cell per (x, y) setting, coloured by `value` on a perceptually uniform map.

    Typical values: false_expiry_rate, recovery_latency_p99. Cells without data are hatched grey.
    """
    import matplotlib as mpl
    from matplotlib.colors import Normalize

    table = metric_table(agg, [x, y], value, confidence)
    ax = new_axes(ax, (7.5, 5.5))
    xs, ys = sorted(table[x].unique()), sorted(table[y].unique())
    cells = {(row[x], row[y]): row for row in table.to_dict("records")}
    finite = table["mean"][np.isfinite(table["mean"])]
    low, high = (float(finite.min()), float(finite.max())) if len(finite) else (0.0, 1.0)
    if high <= low:
        high = low + (abs(low) * 0.1 or 1.0)
    norm = Normalize(vmin=low, vmax=high)
    colours = mpl.colormaps[cmap or ("cividis" if "latency" in value else "viridis")]
    big = len(xs) * len(ys) > 42
    for i, xv in enumerate(xs):
        for j, yv in enumerate(ys):
            row = cells.get((xv, yv))
            if row is not None and np.isfinite(row["mean"]):
                _data_cell(ax, (i, j), row, value, colours(norm(row["mean"])), intervals=not big)
            else:
                _missing_cell(ax, (i, j))
    ax.set_xlim(-0.5, len(xs) - 0.5)
    ax.set_ylim(-0.5, len(ys) - 0.5)
    ax.set_xticks(range(len(xs)), [f"{v:g}" if isinstance(v, int | float) else str(v) for v in xs])
    ax.set_yticks(range(len(ys)), [f"{v:g}" if isinstance(v, int | float) else str(v) for v in ys])
    ax.tick_params(length=0)
    for side in ax.spines.values():
        side.set_visible(False)
    ax.set_xlabel(key_label(x))
    ax.set_ylabel(key_label(y))
    bar = ax.figure.colorbar(
        mpl.cm.ScalarMappable(norm=norm, cmap=colours), ax=ax, fraction=0.05, pad=0.02
    )
    bar.set_label(metric_label(value))
    if is_percent(value):
        from matplotlib.ticker import PercentFormatter

        bar.ax.yaxis.set_major_formatter(PercentFormatter(1.0, decimals=None))
    what = METRIC_LABELS.get(value, (value,))[0]
    ci = "" if big or not table[["low", "high"]].notna().any().any() else f" [{confidence:.0%} CI]"
    finish(
        ax,
        f"{what[:1].upper()}{what[1:]} by {KEY_LABELS.get(x, (x,))[0]} and "
        f"{KEY_LABELS.get(y, (y,))[0]}",
        f"cell: mean{ci}; {n_text(table, 'cell')}",
    )
    ax.grid(False)
    return ax


def _data_cell(ax, at: tuple[int, int], row: dict, value: str, face, *, intervals: bool) -> None:
    """A cell of colour `face` with its mean (and its interval, if `intervals` and known) written in
    white or ink, whichever reads on it."""
    i, j = at
    v = row["mean"]
    ax.add_patch(
        Rectangle(
            (i - 0.5, j - 0.5),
            1,
            1,
            facecolor=face,
            edgecolor="white",
            lw=1.5,
            gid="cell",
        )
    )
    text = format_value(value, v)
    if intervals and np.isfinite(row["low"]) and np.isfinite(row["high"]):
        text += f"\n[{format_value(value, row['low'])}, {format_value(value, row['high'])}]"
    lum = 0.2126 * face[0] + 0.7152 * face[1] + 0.0722 * face[2]
    ax.text(
        i,
        j,
        text,
        ha="center",
        va="center",
        fontsize=ANNOTATION_PT,
        linespacing=1.3,
        color="white" if lum < 0.45 else INK,
        gid="cell-label",
    )


def _missing_cell(ax, at: tuple[int, int]) -> None:
    """A hatched grey cell reading "no data"."""
    i, j = at
    ax.add_patch(
        Rectangle(
            (i - 0.5, j - 0.5),
            1,
            1,
            facecolor="#f4f4f4",
            edgecolor="#bbbbbb",
            hatch="////",
            lw=0.8,
            gid="cell-missing",
        )
    )
    ax.text(
        i,
        j,
        "no data",
        ha="center",
        va="center",
        fontsize=ANNOTATION_PT,
        color="#666666",
        gid="cell-label",
    )


# ---- observed durations (sim.advise's input) ------------------------------------------------


def duration_summary(values) -> pd.Series:
    """Count, median, p90, p99, p99.9 and max of observed durations (seconds)."""
    values = np.asarray(values, dtype=float)
    q = np.quantile(values, [0.5, 0.9, 0.99, 0.999])
    return pd.Series(
        {
            "jobs": len(values),
            "median": q[0],
            "p90": q[1],
            "p99": q[2],
            "p99.9": q[3],
            "max": float(values.max()),
        }
    )


def plot_durations(
    values, *, ttl: float | None = None, heartbeat_interval: float | None = None, ax=None
):
    """Histogram of durations on a log axis, with the median, p99, p99.9 and max marked; optionally
    the TTL and heartbeat interval of a recommendation, to see what each has to cover."""
    ax = new_axes(ax, (10, 4))
    values = np.asarray(values, dtype=float)
    positive = values[values > 0]
    bins = np.geomspace(positive.min(), positive.max(), 60)
    ax.hist(
        positive,
        bins=bins,
        color=PALETTE[0],
        alpha=0.75,
        edgecolor="white",
        lw=0.4,
        gid="histogram",
    )
    ax.set_xscale("log")
    summary = duration_summary(values)
    for k, name in enumerate(("median", "p99", "p99.9", "max")):
        ax.axvline(summary[name], color=INK, ls=(0, (1 + k, 2)), lw=1.0)
        right = k < 2  # the last labels go left of their line, inside the axes
        ax.annotate(
            f"{name} {summary[name]:.3g} s",
            (summary[name], 1.0),
            xycoords=("data", "axes fraction"),
            xytext=(3 if right else -3, -4 - 11 * k),
            textcoords="offset points",
            fontsize=ANNOTATION_PT,
            color=INK,
            va="top",
            ha="left" if right else "right",
        )
    for value, label, colour in (
        (ttl, "TTL", PALETTE[5]),
        (heartbeat_interval, "heartbeat", PALETTE[2]),
    ):
        if value is not None:
            ax.axvline(value, color=colour, lw=2.0)
            ax.annotate(
                f"{label} {value:g} s",
                (value, 0.5),
                xycoords=("data", "axes fraction"),
                xytext=(4, 0),
                textcoords="offset points",
                fontsize=ANNOTATION_PT,
                color=colour,
                rotation=90,
                va="center",
            )
    ax.set_xlabel("processing time (s, log scale)")
    ax.set_ylabel("jobs")
    ax.set_title(f"Observed processing times: {int(summary['jobs'])} jobs", loc="left", fontsize=10)
    ax.grid(color="#e6e6e6", lw=0.6)
    return ax
