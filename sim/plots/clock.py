"""The lease clock of one job of a finished Run: the seconds left on each of its leases over time.

import sim
from sim.plots import lease_clock
lease_clock(sim.run("crash-recovery"), job=1)
"""

from __future__ import annotations

import pandas as pd
from matplotlib.lines import Line2D

from sim.errors import ConfigError
from sim.plots.style import ANNOTATION_PT, INK, LINESTYLES, PALETTE, new_axes
from sim.plots.timeline import busy_window
from sim.scenario.settings import LOCK_TTL


def lease_clock(run, job: int = 1, ax=None):
    """Seconds left on each lease of `job` over time: a heartbeat resets it, zero means expired.

    One sawtooth per lease (colour and line style by worker). A crash (x) stops the renewals but
    not the clock: the lease runs down to zero in the database, where the job becomes claimable
    (o). A lock never runs down. Returns the Axes.
    """
    ax = new_axes(ax, (11, 3.4))
    leases = run.leases[run.leases["job"] == job]
    if leases.empty:
        raise ConfigError(f"job {job}: no lease in this run")
    if run.scenario.policy.lease_ttl >= LOCK_TTL:
        raise ConfigError(
            "lease_clock: this run's claims never expire (a lock): there is no clock to draw"
        )
    events = run.events
    mine = events[(events["job"] == job) & events["kind"].isin(["claim", "heartbeat"])]
    crashes = events[(events["job"] == job) & (events["kind"] == "crash")]
    horizon = float(run.scenario.horizon)
    workers = sorted(leases["worker"].unique(), key=lambda w: int(str(w).lstrip("w") or 0))
    handles, labels = [], []
    top = 0.0
    for lease in leases.itertuples():
        k = workers.index(lease.worker)
        colour, style = PALETTE[k % len(PALETTE)], LINESTYLES[k % len(LINESTYLES)]
        top = max(top, _draw_sawtooth(ax, lease, mine, horizon, (colour, style)))
        if lease.worker not in labels:
            handles.append(Line2D([], [], color=colour, ls=style, lw=1.8))
            labels.append(f"{lease.worker}'s lease")
    for crash in crashes.itertuples():
        ax.axvline(crash.t, color=INK, lw=0.8, ls=":", zorder=1)
        ax.plot([crash.t], [0], marker="x", ms=10, mew=2.2, color=INK, zorder=5, gid="crash")
    if len(crashes):
        handles.append(Line2D([], [], ls="none", marker="x", ms=9, mew=2.2, color=INK))
        labels.append("owner crashes")
    if top > 0:
        ttl = run.scenario.policy.lease_ttl
        ax.axhline(ttl, color="#999999", lw=0.9, ls="--", zorder=1)
        ax.annotate(
            "TTL: a fresh lease",
            (0, ttl),
            xytext=(4, 3),
            textcoords="offset points",
            fontsize=ANNOTATION_PT,
            color="#555555",
        )
    handles.append(Line2D([], [], ls="none", marker="o", ms=8, mfc="white", mec=INK, mew=1.6))
    labels.append("lease runs out: the job is claimable again")
    _frame_clock(ax, run, job, top)
    ax.legend(
        handles,
        labels,
        loc="upper left",
        bbox_to_anchor=(1.005, 1.0),
        fontsize=ANNOTATION_PT,
        frameon=False,
        borderaxespad=0.0,
    )
    return ax


def _draw_sawtooth(ax, lease, renewals: pd.DataFrame, horizon: float, look) -> float:
    """One lease's time left, reset at its claim and each heartbeat, until it is released, the run
    ends or it runs out (an o at zero); returns the most time left it had. `renewals`: the job's
    claim and heartbeat events; `look`: (colour, line style)."""
    colour, style = look
    renewals = renewals[
        (renewals["worker"] == lease.worker)
        & (renewals["attempt"] == lease.attempt)
        & (renewals["t"] >= lease.start)
    ]
    renewed_at = renewals["t"].to_numpy(float)
    untils = renewals["detail"].to_numpy(float)
    last_until = float(untils[-1])
    stop = min(last_until, horizon)
    if lease.outcome == "completed" and lease.released_at < last_until:
        stop = float(lease.released_at)
    xs, ys = [], []
    for i, (t, until) in enumerate(zip(renewed_at, untils, strict=True)):
        end = min(renewed_at[i + 1], stop) if i + 1 < len(renewed_at) else stop
        if t > stop:
            break
        xs += [t, end]
        ys += [until - t, until - end]
    ax.plot(xs, ys, color=colour, ls=style, lw=1.8, zorder=3, gid="lease-left")
    if stop == last_until and stop < horizon:
        ax.plot(
            [stop],
            [0],
            marker="o",
            ms=8,
            mfc="white",
            mec=INK,
            mew=1.6,
            zorder=5,
            gid="expired",
        )
    return max(ys)


def _frame_clock(ax, run, job: int, top: float) -> None:
    """The zero line, limits (the busy part of the run), axis labels, title and grid."""
    ax.axhline(0, color=INK, lw=1.0, zorder=2)
    ax.set_xlim(*busy_window(run))
    ax.set_ylim(-0.06 * max(top, 1.0), 1.12 * max(top, 1.0))
    ax.set_xlabel("simulated time (s)")
    ax.set_ylabel("seconds left on the lease")
    name = run.scenario.name
    ax.set_title(
        ("" if name in ("lease", "lock") else f"{name}: ")
        + f"time left on each lease of job {job} "
        "(a heartbeat resets it; at zero the job is claimable again)",
        loc="left",
        fontsize=10,
    )
    ax.grid(color="#e6e6e6", lw=0.6)
