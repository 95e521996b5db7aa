"""Figures only a lesson draws: false expiry vs TTL beside the theory, duplicates vs dedup
retention, claims under contention. General figures of a run or a sweep live in sim.plots."""

from __future__ import annotations

import numpy as np
import pandas as pd

from sim.plots.style import (
    ANNOTATION_PT,
    INK,
    LINESTYLES,
    MARKERS,
    PALETTE,
    label_log_axis,
    new_axes,
)
from sim.scenario.settings import Scenario
from sim.support.in_words import count
from sim.teaching.caveats import false_expiry_theory
from sim.teaching.lessons import STRATEGIES
from sim.theory.stats import wilson_interval


def false_expiry_table(
    runs: pd.DataFrame, keys=("policy.heartbeat", "policy.lease_ttl"), confidence: float = 0.95
) -> pd.DataFrame:
    """Per key combination of a sweep's runs: false expiries and leases pooled over replications,
    their ratio and its Wilson interval (well behaved when no lease expired)."""
    keys = list(keys)
    pooled = runs.groupby(keys, sort=True)[["false_expiries", "leases"]].sum().reset_index()
    bounds = [
        wilson_interval(fe, n, confidence)
        for fe, n in zip(pooled["false_expiries"], pooled["leases"], strict=True)
    ]
    pooled["rate"] = pooled["false_expiries"] / pooled["leases"].where(pooled["leases"] > 0)
    pooled["low"] = [b[0] for b in bounds]
    pooled["high"] = [b[1] for b in bounds]
    return pooled


def plot_false_expiry(table: pd.DataFrame, scenario: Scenario, ax=None):
    """False-expiry rate vs lease TTL, without and with heartbeats (false_expiry_table of a sweep
    over policy.lease_ttl x policy.heartbeat), beside
    sim.theory.closed_forms.false_expiry_probability.

    Log-log axes; a setting with no false expiry is drawn as a down-pointing marker at the upper end
    of its interval. Dotted lines mark the p99 of the job durations and of the pauses.
    """
    ax = new_axes(ax, (9, 5))
    w, p, f = scenario.workload, scenario.policy, scenario.faults
    theory = false_expiry_theory(scenario)
    ttls = np.geomspace(table["policy.lease_ttl"].min(), table["policy.lease_ttl"].max(), 60)
    for k, (beat, group) in enumerate(table.groupby("policy.heartbeat", sort=True)):
        colour = PALETTE[k]
        label = f"heartbeat every {p.heartbeat_interval:g} s" if beat else "no heartbeat"
        seen = group[group["false_expiries"] > 0]
        ax.errorbar(
            seen["policy.lease_ttl"],
            seen["rate"],
            yerr=[seen["rate"] - seen["low"], seen["high"] - seen["rate"]],
            ls="none",
            marker="o",
            ms=6,
            mec=INK,
            mew=0.6,
            color=colour,
            capsize=3,
            label=f"simulated, {label} (95% interval)",
            gid="simulated",
        )
        unseen = group[group["false_expiries"] == 0]
        if len(unseen):
            ax.plot(
                unseen["policy.lease_ttl"],
                unseen["high"],
                ls="none",
                marker="v",
                ms=7,
                mec=INK,
                mew=0.6,
                color=colour,
                label=f"none seen, {label}: upper bound",
                gid="upper-bound",
            )
        ax.plot(
            ttls,
            [theory(t, bool(beat)) for t in ttls],
            color=colour,
            ls="--",
            lw=1.4,
            label=f"theory, {label}",
            gid="theory",
        )
    for value, text in (
        (w.processing.quantile(0.99), "p99 job duration"),
        (f.pause_duration.quantile(0.99), "p99 pause"),
    ):
        ax.axvline(value, color="#777777", ls=":", lw=1.0)
        ax.annotate(
            text,
            (value, 0.5),
            xycoords=("data", "axes fraction"),
            xytext=(3, 0),
            textcoords="offset points",
            fontsize=ANNOTATION_PT,
            color="#555555",
            rotation=90,
            va="center",
        )
    ax.set_xscale("log")
    ax.set_yscale("log")
    label_log_axis(ax.xaxis, table["policy.lease_ttl"])  # '5', '20', '80', not 6x10^0 minor labels
    ax.set_xlabel("lease TTL (s)")
    ax.set_ylabel("false-expiry rate (share of leases expired\nunder a live owner, log scale)")
    ax.set_title(
        "False expiry vs TTL: without a heartbeat the TTL must outlast the job, with one only "
        "the longest stall",
        loc="left",
        fontsize=10,
    )
    ax.grid(color="#e6e6e6", lw=0.6, which="both")
    ax.legend(fontsize=ANNOTATION_PT, frameon=False, loc="lower left")
    return ax


def plot_retention(curve: pd.DataFrame, window: float, ax=None):
    """Duplicates that got through vs dedup retention, with the redelivery window marked."""
    from matplotlib.ticker import PercentFormatter

    ax = new_axes(ax, (8, 4))
    ax.plot(
        curve["retention"],
        100 * curve["duplicate_share"],
        color=PALETTE[0],
        marker="o",
        mec=INK,
        mew=0.6,
        lw=1.6,
        gid="duplicates",
    )
    ax.axvline(window, color=INK, ls="--", lw=1.2)
    ax.annotate(
        "redelivery window",
        (window, ax.get_ylim()[1] * 0.9),
        xytext=(5, 0),
        textcoords="offset points",
        fontsize=ANNOTATION_PT,
        color=INK,
    )
    ax.yaxis.set_major_formatter(PercentFormatter(100, decimals=None))
    ax.set_xlabel("dedup marker retention (s)")
    ax.set_ylabel("redeliveries applied again")
    ax.set_ylim(bottom=0)
    ax.set_title(
        "Dedup state kept shorter than the redelivery window lets duplicates through",
        loc="left",
        fontsize=10,
    )
    ax.grid(color="#e6e6e6", lw=0.6)
    return ax


def plot_contention(frame: pd.DataFrame, axes=None):
    """Three panels vs workers, one line per claim strategy: time to drain the batch, seconds spent
    waiting on row locks (the FOR UPDATE convoy), claims that lost the race (no row back)."""

    if axes is None:
        import matplotlib.pyplot as plt

        _, axes = plt.subplots(1, 3, figsize=(14, 4), layout="constrained")
    means = frame.groupby(["claim", "workers"], sort=True)[
        ["drain_time", "lock_wait_seconds", "lost_claims"]
    ].mean()
    panels = (
        ("drain_time", "time to drain the batch (s)"),
        ("lock_wait_seconds", "worker-seconds waiting on row locks"),
        ("lost_claims", "claims that lost the race (no row)"),
    )
    order = [s for s in STRATEGIES if s in means.index.get_level_values(0)]
    for ax, (metric, label) in zip(axes, panels, strict=True):
        for k, strategy in enumerate(order):
            values = means.loc[strategy, metric]
            ax.plot(
                values.index,
                values.to_numpy(),
                color=PALETTE[k],
                marker=MARKERS[k],
                ls=LINESTYLES[k],
                lw=1.6,
                mec=INK,
                mew=0.6,
                label=strategy,
                gid="line",
            )
        ax.set_xlabel("workers")
        ax.set_ylabel(label)
        ax.set_xscale("log", base=2)
        ax.set_xticks(
            sorted(frame["workers"].unique()), [str(w) for w in sorted(frame["workers"].unique())]
        )
        ax.set_ylim(bottom=0)
        ax.grid(color="#e6e6e6", lw=0.6)
    axes[0].legend(
        title="claim strategy", fontsize=ANNOTATION_PT, title_fontsize=ANNOTATION_PT, frameon=False
    )
    seeds = frame.groupby(["claim", "workers"]).size().max()
    axes[0].figure.suptitle(
        f"Claims under contention: {int(frame['jobs'].iloc[0])} jobs at once, select-to-update "
        f"gap {1000 * frame['gap'].iloc[0]:g} ms; mean of {count(seeds, 'run')} per point",
        x=0.01,
        ha="left",
        fontsize=10,
    )
    return axes
