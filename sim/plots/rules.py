"""Figures of the two measured rules of thumb (sim.teaching.rules_of_thumb, notebook 11). Each takes
ax= and returns the Axes; colours and markers from sim.plots.style."""

from __future__ import annotations

import numpy as np
import pandas as pd

from sim.plots.style import ANNOTATION_PT, INK, PALETTE, new_axes


def repeat_recovery_excess(frame: pd.DataFrame, ax=None):
    """The second recovery's mean latency minus the closed form, with its 95% CI, against the
    watcher interval; dotted verticals at multiples of the heartbeat interval."""
    ax = new_axes(ax, (9, 4.2))
    h = float(frame["heartbeat_interval"].iloc[0])
    w = frame["watcher_interval"].to_numpy(float)
    for multiple, colour, marker, label in (
        (False, PALETTE[0], "o", "W not a multiple of h"),
        (True, PALETTE[5], "s", "W a multiple of h"),
    ):
        part = frame[frame["multiple"] == multiple]
        if not len(part):
            continue
        err = np.vstack([part["mean"] - part["ci_low"], part["ci_high"] - part["mean"]])
        ax.errorbar(
            part["watcher_interval"],
            part["excess"],
            yerr=err,
            fmt=marker,
            color=colour,
            mec=INK,
            mew=0.6,
            ecolor=colour,
            capsize=3,
            lw=1.2,
            label=label,
        )
    for k in range(1, int(w.max() // h) + 1):
        ax.axvline(k * h, color="#999999", ls=":", lw=1)
    ax.axhline(0, color=INK, lw=0.8)
    ax.set_xlabel("watcher interval W (s)")
    ax.set_ylabel("simulated mean minus closed form (s)")
    reps = int(frame["replications"].iloc[0])
    ax.set_title(
        f"Second recovery of a job, heartbeat every {h:g} s: excess over L - h/2 + W/2 + P/2\n"
        f"95% intervals over {reps} runs per point; dotted: multiples of the heartbeat interval",
        loc="left",
        fontsize=10,
    )
    ax.legend(fontsize=ANNOTATION_PT, frameon=False)
    ax.grid(color="#e6e6e6", lw=0.6)
    return ax


def load_recovery_figure(frame: pd.DataFrame, ax=None):
    """Simulated mean and 95th percentile of the recovery latency (95% CIs) against utilization,
    beside the light-load closed form's mean and 95th percentile."""
    ax = new_axes(ax, (9, 4.2))
    u = frame["utilization"].to_numpy(float) * 100
    for (metric, label), colour, marker in zip(
        (("mean", "simulated mean"), ("p95", "simulated 95th percentile")),
        PALETTE[:2],
        "os",
        strict=True,
    ):
        low, high = frame[f"{metric}_ci_low"], frame[f"{metric}_ci_high"]
        err = np.vstack([frame[metric] - low, high - frame[metric]])
        ax.errorbar(
            u,
            frame[metric],
            yerr=err,
            fmt=marker + "-",
            color=colour,
            mec=INK,
            mew=0.6,
            capsize=3,
            lw=1.4,
            label=label,
        )
    ax.axhline(
        frame["closed_form_mean"].iloc[0],
        color=PALETTE[0],
        ls="--",
        lw=1.4,
        label="closed form: mean",
    )
    ax.axhline(
        frame["closed_form_p95"].iloc[0],
        color=PALETTE[1],
        ls=":",
        lw=1.6,
        label="closed form: 95th percentile (light load)",
    )
    ax.set_xlabel("worker utilization (%)")
    ax.set_ylabel("recovery latency (s)")
    ax.set_title(
        "Recovery latency as the workers get busier; 95% intervals over "
        f"{int(frame['runs'].iloc[0])} runs per point",
        loc="left",
        fontsize=10,
    )
    ax.legend(fontsize=ANNOTATION_PT, frameon=False, loc="upper left")
    ax.grid(color="#e6e6e6", lw=0.6)
    return ax
