"""Notebook 04's recovery figures beyond analysis.recovery_vs_interval: the claim-takes-expired
design drawn over it, and what the watcher costs. Each takes ax= and returns the Axes."""

from __future__ import annotations

import numpy as np
import pandas as pd

from sim.plots.style import ANNOTATION_PT, INK, PALETTE, label_log_axis, new_axes

CLAIM_COLOUR = PALETTE[1]


def claim_takes_expired(
    row: pd.Series, theory: float, ax=None, *, metric: str = "recovery_latency_mean"
):
    """Horizontal lines for the design without a watcher on the recovery path (the claim takes
    expired leases): its simulated mean, 95% CI band (when defined) and theory L - h/2 + P/2.
    `row` is one row of a SweepResult.aggregate()."""
    ax = new_axes(ax, (8, 4.8))
    low, high = row[f"{metric}_ci_low"], row[f"{metric}_ci_high"]
    if np.isfinite(low) and np.isfinite(high):
        ax.axhspan(
            low,
            high,
            color=CLAIM_COLOUR,
            alpha=0.2,
            lw=0,
            label="claim takes expired: simulated 95% CI",
            gid="claim-ci",
        )
    ax.axhline(
        row[f"{metric}_mean"],
        color=CLAIM_COLOUR,
        lw=1.6,
        label="claim takes expired: simulated mean",
        gid="claim-simulated",
    )
    ax.axhline(
        theory,
        color=CLAIM_COLOUR,
        ls=":",
        lw=1.6,
        label="claim takes expired: theory L - h/2 + P/2",
        gid="claim-theory",
    )
    ax.legend(fontsize=ANNOTATION_PT, frameon=False, loc="upper left")
    return ax


def watcher_cost(
    agg: pd.DataFrame,
    *,
    latency: float,
    baseline: float | None = None,
    ax=None,
    x: str = "policy.watcher_interval",
    metric: str = "db_requeue_expired_per_s",
):
    """The watcher's statements per second against its interval (log-log), simulated beside the
    theory 1/W, with the whole `baseline` queue's statements per second for scale.

    It counts statements, not their cost: one scan is one indexed statement (see sql/), and how
    long it takes on a real server is measured in notebook 08, not here."""
    from sim.theory import closed_forms

    ax = new_axes(ax, (6, 4.8))
    ws = agg[x].to_numpy(dtype=float)
    ax.plot(
        ws,
        agg[f"{metric}_mean"],
        "o",
        color=PALETTE[0],
        mec=INK,
        mew=0.6,
        label="simulated",
        gid="simulated",
    )
    grid = np.geomspace(ws.min(), ws.max(), 100)
    ax.plot(
        grid,
        [closed_forms.watcher_load(watcher_interval=w, latency=latency) for w in grid],
        "--",
        color=PALETTE[5],
        label="theory: 1 / W",
        gid="theory",
    )
    if baseline is not None:
        ax.axhline(
            baseline,
            color="#777777",
            ls=":",
            lw=1.2,
            label="for scale: every statement of the baseline queue",
            gid="baseline",
        )
    ax.set_xscale("log")
    ax.set_yscale("log")
    label_log_axis(ax.xaxis, ws)
    ax.set_xlabel("watcher interval (s)")
    ax.set_ylabel("watcher statements per second")
    ax.set_title(
        "What the watcher costs: one statement per scan, 1 / W statements per second",
        loc="left",
        fontsize=10,
    )
    ax.grid(color="#e6e6e6", lw=0.6, which="both")
    ax.legend(fontsize=ANNOTATION_PT, frameon=False)
    return ax
