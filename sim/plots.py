"""Matplotlib figures of a finished Run, of sweeps and of the peer comparison. Every function takes
ax= and returns the Axes.

    import sim
    from sim.plots import lease_timeline
    lease_timeline(sim.run("gc-pause-zombie"))

Analysis figures (below the timeline): double_processing (claims and charges per job by claim
strategy), race_probability, recovery_vs_interval (with the analytic curve), heatmap (TTL x
heartbeat), tradeoff (the Pareto chart) and peer_comparison; they take sweep-shaped DataFrames.

Colours come from the Okabe-Ito palette (colour-blind safe); every distinction that matters is
also made by hatching, line style or marker, so the figures read in greyscale. Red is reserved for
overlapping leases (two holders of one job at once).
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np
import pandas as pd
from matplotlib.lines import Line2D
from matplotlib.patches import Patch, Rectangle

from sim.errors import ConfigError
from sim.scenario import LOCK_TTL
from sim.wording import count

# Okabe-Ito without vermillion (red means "overlap") and black (markers are black).
JOB_COLOURS = ("#E69F00", "#56B4E9", "#009E73", "#F0E442", "#0072B2", "#CC79A7")
OVERLAP = "#D00000"
INK = "#222222"
# How a lease ended -> hatch (plain = completed), and its legend text.
END_STYLES = {
    "completed": ("", "completed"),
    "expired": ("////", "expired (TTL ran out)"),
    "revoked": ("xxxx", "revoked (another worker claimed it)"),
    "crashed": ("\\\\\\\\", "owner crashed"),
    "released": ("----", "released (refused / abandoned / error)"),
    "open": ("....", "still held at the horizon"),
}
BAR_HEIGHT = 0.56


def lease_timeline(run, ax=None, *, window: tuple[float, float] | None = None,
                   workers: int | Iterable[int | str] | None = None, jobs: int | Iterable[int] | None = None):
    """One lane per worker (w0 at the top), one bar per lease, faults and watcher ticks.

    - bar: a lease from its claim to its `end`, coloured by job, hatched by `end_reason`;
    - faded tail: the owner still working after its lease expired or was taken (a zombie);
    - thin line with a cap: a crashed owner's lease, still valid in the database until `until`;
    - red outline: a lease overlapping another lease on the same job (double claim);
    - dotted arrow: the job re-claimed after its previous lease crashed or expired;
    - ticks above a bar: heartbeats; x: crash; o: heartbeat/completion refused by fencing;
    - shaded lane: paused, cut off from the DB (partition) or down (crash to restart);
    - bottom lane: stuck-watcher ticks, tall when they requeued jobs (with the count).

    window=(t0, t1) zooms; workers= an int (the first N) or worker names/indices to show; jobs= a
    job id or ids: draw only their leases, arrows and marks (the lanes' pauses, partitions and down
    times, and the watcher lane, stay), to follow one job through a busy run.
    """
    scenario = run.scenario
    lanes = _lanes(scenario.policy.workers, workers)
    only = _jobs(run, jobs)
    t0, t1 = _window(window, scenario.horizon)
    show_watcher = scenario.policy.watcher
    n_rows = len(lanes) + (1 if show_watcher else 0)
    if ax is None:
        import matplotlib.pyplot as plt

        _, ax = plt.subplots(figsize=(13, 1.9 + 0.42 * n_rows), layout="constrained")
    y_of = {name: i for i, name in enumerate(lanes)}
    events = run.events
    events = events[(events["t"] >= t0) & (events["t"] <= t1)]
    legend: dict[str, object] = {}

    _draw_spans(ax, run.events, y_of, t0, t1, float(scenario.horizon), legend)
    leases = run.leases
    tail_end = leases["released_at"].fillna(leases["end"]).clip(lower=leases["end"])
    visible = (leases["worker"].isin(lanes) & (leases["start"] <= t1)
               & (np.maximum(tail_end, leases["until"]) >= t0))
    if only is not None:
        visible &= leases["job"].isin(only)
    overlapping = _overlapping(leases)
    span = t1 - t0
    for i, lease in zip(np.flatnonzero(visible.to_numpy()), leases[visible].to_dict("records"), strict=True):
        _draw_lease(ax, lease, y_of[lease["worker"]], float(tail_end.iloc[i]), overlapping[i], span, legend)
    _draw_links(ax, leases if only is None else leases[leases["job"].isin(only)], y_of, t0, t1, legend)
    _draw_marks(ax, events if only is None else events[events["job"].isin(only)], y_of,
                _charged_twice(run.events), legend)
    if show_watcher:
        _draw_watcher(ax, events, len(lanes), legend)

    ax.set_xlim(t0, t1)
    ax.set_ylim(n_rows - 0.5, -0.5)
    ax.set_yticks(range(n_rows), lanes + (["watcher"] if show_watcher else []))
    for y in range(n_rows - 1):
        ax.axhline(y + 0.5, color="#dddddd", lw=0.6, zorder=0)
    if show_watcher:
        ax.axhline(len(lanes) - 0.5, color="#888888", lw=0.9, zorder=0)
    ax.grid(axis="x", color="#e6e6e6", lw=0.6)
    ax.set_axisbelow(True)
    ax.tick_params(axis="y", length=0)
    ax.set_xlabel("simulated time (s)")
    ax.set_ylabel("worker")
    ax.set_title(_title(run, window, only), loc="left", fontsize=10)
    order = [k for k in _LEGEND_ORDER if k in legend]
    ax.legend([legend[k] for k in order], order, loc="upper left", bbox_to_anchor=(1.005, 1.0),
              fontsize=8, frameon=False, borderaxespad=0.0, handlelength=2.4, handleheight=1.2)
    return ax


# ---- pieces --------------------------------------------------------------------------------------

def _draw_lease(ax, lease, y: float, tail_end: float, overlapping: bool, span: float, legend) -> None:
    start, end, reason = float(lease["start"]), float(lease["end"]), lease["end_reason"]
    hatch, label = END_STYLES.get(reason, ("", reason))
    colour = JOB_COLOURS[int(lease["job"]) % len(JOB_COLOURS)]
    top = y - BAR_HEIGHT / 2
    ax.add_patch(Rectangle((start, top), end - start, BAR_HEIGHT, facecolor=colour, edgecolor=INK,
                           lw=0.6, hatch=hatch, zorder=3, gid="lease"))
    legend.setdefault(label, Patch(facecolor="white", edgecolor=INK, lw=0.6, hatch=hatch))
    if reason in ("expired", "revoked") and tail_end > end:
        # the owner does not know yet: it keeps working on a lease it no longer has
        ax.add_patch(Rectangle((end, top + 0.12), tail_end - end, BAR_HEIGHT - 0.24, facecolor=colour,
                               alpha=0.35, edgecolor=colour, lw=0.8, ls=(0, (2, 2)), zorder=2, gid="zombie"))
        legend.setdefault(_ZOMBIE, Patch(facecolor="#bbbbbb", alpha=0.6, edgecolor="#888888", ls=(0, (2, 2))))
    if reason == "crashed" and lease["until"] > end:
        ax.plot([end, lease["until"]], [y, y], color=INK, lw=1.1, zorder=2, gid="db-lease")
        ax.plot([lease["until"]], [y], marker="|", ms=9, mew=1.6, color=INK, zorder=2, gid="db-lease")
        legend.setdefault(_DB_LEASE, Line2D([], [], color=INK, lw=1.1, marker="|", ms=9, mew=1.6))
    if overlapping:
        right = max(end, tail_end)
        ax.add_patch(Rectangle((start, top - 0.06), right - start, BAR_HEIGHT + 0.12, fill=False,
                               edgecolor=OVERLAP, lw=2.0, zorder=5, gid="overlap"))
        legend.setdefault(_OVERLAP, Patch(facecolor="none", edgecolor=OVERLAP, lw=2.0))
    attempt = int(lease["attempt"])
    text = f"j{int(lease['job'])}" + (f" #{attempt}" if attempt > 1 else "")
    if end - start >= (0.012 + 0.0065 * len(text)) * span:  # room for the label inside the bar
        ax.text(start + 0.004 * span, y, text, va="center", ha="left", fontsize=7, color=INK,
                zorder=4, clip_on=True,
                bbox={"boxstyle": "square,pad=0.1", "facecolor": "white", "alpha": 0.7, "lw": 0})


def _draw_links(ax, leases: pd.DataFrame, y_of: dict, t0: float, t1: float, legend) -> None:
    """Dotted arrows from a lost lease to the job's next claim; red dashes for double claims."""
    ordered = leases.sort_values(["job", "start"], kind="stable").reset_index(drop=True)
    previous = ordered.shift(1)
    lanes = list(y_of)
    follows = ((previous["job"] == ordered["job"]) & ordered["worker"].isin(lanes)
               & previous["worker"].isin(lanes) & (ordered["start"] >= t0)
               & previous["end_reason"].isin(["revoked", "crashed", "expired", "released"]))
    for k in np.flatnonzero(follows.to_numpy(dtype=bool)):
        prev, nxt = previous.iloc[k], ordered.iloc[k]
        y_prev, y_next = y_of[prev["worker"]], y_of[nxt["worker"]]
        if prev["end_reason"] == "revoked":
            if prev["revoked_by"] == nxt["worker"] and nxt["start"] <= t1:
                ax.plot([nxt["start"]] * 2, [y_prev, y_next], color=OVERLAP, lw=1.0, ls=(0, (3, 2)),
                        zorder=6, gid="double-claim")
                ax.plot([nxt["start"]], [y_next], marker="o", ms=4, color=OVERLAP, zorder=6, gid="double-claim")
                legend.setdefault(_DOUBLE, Line2D([], [], color=OVERLAP, lw=1.0, ls=(0, (3, 2)), marker="o", ms=4))
            continue
        source = prev["until"] if prev["end_reason"] == "crashed" else prev["end"]
        if source > t1 or nxt["start"] > t1 + (t1 - t0):
            continue
        ax.annotate("", xy=(nxt["start"], y_next), xytext=(source, y_prev),
                    arrowprops={"arrowstyle": "->", "color": INK, "lw": 0.9, "ls": ":", "shrinkA": 2, "shrinkB": 2},
                    zorder=6, gid="reclaim")
        legend.setdefault(_RECLAIM, Line2D([], [], color=INK, lw=0.9, ls=":"))
        if prev["end_reason"] == "crashed":  # the recovery latency, crash to re-claim
            ax.annotate(f"recovery {nxt['start'] - prev['end']:.3g} s", (nxt["start"], y_next + BAR_HEIGHT / 2),
                        xytext=(-2, -1), textcoords="offset points", ha="right", va="top", fontsize=7,
                        color=INK, zorder=6, annotation_clip=True, gid="recovery",
                        bbox={"boxstyle": "round,pad=0.15", "facecolor": "white", "alpha": 0.8, "lw": 0})


def _draw_marks(ax, events: pd.DataFrame, y_of: dict, charged_twice: set, legend) -> None:
    mine = events[events["worker"].isin(list(y_of))]
    y = mine["worker"].map(y_of)
    charges = (mine["kind"] == "psp_charge") & (mine["detail"] == "new") & mine["job"].isin(charged_twice)
    if charges.any():
        ax.plot(mine.loc[charges, "t"], y[charges] + BAR_HEIGHT / 2 + 0.14, ls="none", marker=r"$\$$",
                ms=8, color=INK, zorder=4, gid="charge")
        legend.setdefault(_CHARGE, Line2D([], [], ls="none", marker=r"$\$$", ms=8, color=INK))
    beats = mine["kind"] == "heartbeat"
    if beats.any():
        ax.plot(mine.loc[beats, "t"], y[beats] - BAR_HEIGHT / 2 - 0.09, ls="none", marker="|", ms=5,
                mew=1.0, color=INK, zorder=4, gid="heartbeat")
        legend.setdefault(_HEARTBEAT, Line2D([], [], ls="none", marker="|", ms=7, mew=1.0, color=INK))
    lost = mine["kind"] == "heartbeat_lost"
    if lost.any():
        ax.plot(mine.loc[lost, "t"], y[lost] - BAR_HEIGHT / 2 - 0.09, ls="none", marker="|", ms=5,
                mew=1.0, color="#999999", zorder=4, gid="heartbeat-lost")
        legend.setdefault(_HEARTBEAT_LOST, Line2D([], [], ls="none", marker="|", ms=7, mew=1.0, color="#999999"))
    refused = mine["kind"].isin(["heartbeat_rejected", "complete_rejected"])
    if refused.any():
        ax.plot(mine.loc[refused, "t"], y[refused], ls="none", marker="o", ms=8, mew=1.6, mfc="white",
                color=INK, zorder=7, gid="refused")
        legend.setdefault(_REFUSED, Line2D([], [], ls="none", marker="o", ms=7, mew=1.6, mfc="white", color=INK))
    crashes = mine["kind"] == "crash"
    if crashes.any():
        ax.plot(mine.loc[crashes, "t"], y[crashes], ls="none", marker="x", ms=10, mew=2.4, color=INK,
                zorder=7, gid="crash")
        legend.setdefault(_CRASH, Line2D([], [], ls="none", marker="x", ms=8, mew=2.2, color=INK))


def _draw_watcher(ax, events: pd.DataFrame, y: float, legend) -> None:
    ticks = events[events["kind"] == "watcher_tick"]
    moved = pd.to_numeric(ticks["detail"], errors="coerce").fillna(0)
    quiet, busy = ticks[moved == 0], ticks[moved > 0]
    if not quiet.empty:
        ax.plot(quiet["t"], np.full(len(quiet), y), ls="none", marker="|", ms=6, mew=0.8,
                color="#9a9a9a", zorder=3, gid="watcher-tick")
        legend.setdefault(_WATCHER, Line2D([], [], ls="none", marker="|", ms=6, mew=0.8, color="#9a9a9a"))
    if not busy.empty:
        ax.plot(busy["t"], np.full(len(busy), y), ls="none", marker="|", ms=16, mew=2.6, color=INK,
                zorder=4, gid="watcher-requeue")
        for t, n in zip(busy["t"], moved[moved > 0], strict=True):
            ax.annotate(f"{int(n)}", (t, y), xytext=(4, 4), textcoords="offset points", fontsize=7,
                        color=INK, va="bottom")
        legend.setdefault(_WATCHER_BUSY, Line2D([], [], ls="none", marker="|", ms=12, mew=2.6, color=INK))


def _draw_spans(ax, events: pd.DataFrame, y_of: dict, t0: float, t1: float, horizon: float, legend) -> None:
    """Shade each lane while its worker is paused, partitioned from the DB, or down after a crash."""
    styles = {
        "pause": ({"facecolor": "#8c8c8c", "alpha": 0.35, "lw": 0}, _PAUSE),
        "partition": ({"facecolor": "#cfe3f3", "edgecolor": "#7a9ab5", "hatch": "..", "lw": 0}, _PARTITION),
        "down": ({"facecolor": "#000000", "alpha": 0.07, "lw": 0}, _DOWN),
    }
    pairs = {"pause_start": ("pause", True), "pause_end": ("pause", False),
             "partition_start": ("partition", True), "partition_end": ("partition", False),
             "crash": ("down", True), "restart": ("down", False)}
    mine = events[events["kind"].isin(list(pairs)) & events["worker"].isin(list(y_of))]
    opened: dict[tuple[str, str], float] = {}
    spans: list[tuple[str, str, float, float]] = []
    for t, kind, worker in zip(mine["t"], mine["kind"], mine["worker"], strict=True):
        what, starts = pairs[kind]
        if starts:
            opened[(what, worker)] = t
        elif (what, worker) in opened:
            spans.append((what, worker, opened.pop((what, worker)), t))
    spans += [(what, worker, start, max(horizon, t1)) for (what, worker), start in opened.items()]
    for what, worker, start, stop in spans:
        if stop < t0 or start > t1:
            continue
        style, label = styles[what]
        y = y_of[worker]
        ax.add_patch(Rectangle((start, y - 0.5), stop - start, 1.0, zorder=1, gid=what, **style))
        legend.setdefault(label, Patch(**style))


# ---- helpers -------------------------------------------------------------------------------------

_ZOMBIE = "owner still on the job after losing its lease"
_DB_LEASE = "lease still valid in the DB, owner dead"
_OVERLAP = "overlapping leases on one job"
_DOUBLE = "the second claim of that job"
_RECLAIM = "re-claimed after crash / expiry"
_HEARTBEAT = "heartbeat (lease renewed)"
_CHARGE = "PSP charge of a job charged twice"
_HEARTBEAT_LOST = "heartbeat lost (fault)"
_REFUSED = "refused by fencing (heartbeat / completion)"
_CRASH = "crash"
_PAUSE = "paused (stop-the-world)"
_PARTITION = "cut off from the DB (partition)"
_DOWN = "down (crash to restart)"
_WATCHER = "watcher tick, nothing to do"
_WATCHER_BUSY = "watcher tick that requeued jobs (count)"
_LEGEND_ORDER = [label for _, label in END_STYLES.values()] + [
    _ZOMBIE, _DB_LEASE, _OVERLAP, _DOUBLE, _RECLAIM, _HEARTBEAT, _HEARTBEAT_LOST, _CHARGE, _REFUSED, _CRASH,
    _PAUSE, _PARTITION, _DOWN, _WATCHER, _WATCHER_BUSY,
]


def _lanes(count: int, workers) -> list[str]:
    names = [f"w{i}" for i in range(count)]
    if workers is None:
        return names
    if isinstance(workers, int) and not isinstance(workers, bool):
        if workers < 1:
            raise ConfigError(f"workers: must be at least 1, got {workers}")
        return names[:workers]
    chosen = []
    for w in workers:
        name = f"w{w}" if isinstance(w, int | np.integer) else str(w)
        if name not in names:
            raise ConfigError(f"workers: {w!r} is not one of {names[0]}..{names[-1]}")
        chosen.append(name)
    if not chosen:
        raise ConfigError("workers: choose at least one worker")
    return sorted(dict.fromkeys(chosen), key=names.index)


def _jobs(run, jobs) -> list[int] | None:
    if jobs is None:
        return None
    wanted = [jobs] if isinstance(jobs, int | np.integer) else list(jobs)
    known = set(run.leases["job"].astype(int))
    chosen = []
    for j in wanted:
        if isinstance(j, bool) or not isinstance(j, int | np.integer) or int(j) not in known:
            raise ConfigError(f"jobs: {j!r} is not a leased job of this run")
        chosen.append(int(j))
    if not chosen:
        raise ConfigError("jobs: choose at least one job")
    return sorted(set(chosen))


def _window(window, horizon: float) -> tuple[float, float]:
    if window is None:
        return 0.0, float(horizon)
    try:
        t0, t1 = (float(v) for v in window)
    except (TypeError, ValueError):
        raise ConfigError(f"window: expected (t0, t1) in seconds, got {window!r}") from None
    if not (math.isfinite(t0) and math.isfinite(t1) and t1 > t0):
        raise ConfigError(f"window: need t0 < t1, got ({t0:g}, {t1:g})")
    return t0, t1


def _overlapping(leases: pd.DataFrame) -> np.ndarray:
    """Per lease: revoked, or its [start, end) overlaps another lease of the same job."""
    flags = (leases["end_reason"] == "revoked").to_numpy().copy()
    ordered = leases.sort_values(["job", "start"], kind="stable")
    job, start, end = (ordered[c].to_numpy() for c in ("job", "start", "end"))
    index = ordered.index.to_numpy()
    position = {label: i for i, label in enumerate(leases.index)}
    reach, reach_at = -np.inf, None
    for k in range(len(ordered)):
        if k == 0 or job[k] != job[k - 1]:
            reach, reach_at = end[k], index[k]
            continue
        if start[k] < reach:
            flags[position[index[k]]] = True
            flags[position[reach_at]] = True
        if end[k] > reach:
            reach, reach_at = end[k], index[k]
    return flags


def _charged_twice(events: pd.DataFrame) -> set:
    charges = events[(events["kind"] == "psp_charge") & (events["detail"] == "new")]
    per_job = charges.groupby("job").size()
    return set(per_job[per_job > 1].index)


def _title(run, window, jobs: list[int] | None = None) -> str:
    s, p = run.scenario, run.scenario.policy
    summary = run.summary
    beat = f"heartbeat every {p.heartbeat_interval:g} s" if p.heartbeat else "no heartbeat"
    watch = f"watcher every {p.watcher_interval:g} s" if p.watcher else "no watcher"
    ttl = "no TTL (a lock: claims never expire)" if p.lease_ttl >= LOCK_TTL else f"TTL {p.lease_ttl:g} s"
    facts = [f"claim={p.claim}", ttl, beat, watch,
             "fenced" if p.fencing else "unfenced", f"seed {s.seed}", run.backend]
    counts = [count(int(summary[key]), one, many) for key, one, many in (
        ("leases", "lease", "leases"), ("false_expiries", "false expiry", "false expiries"),
        ("double_claims", "double claim", "double claims"), ("crashes", "crash", "crashes"),
        ("duplicate_external_effects", "duplicate PSP charge", "duplicate PSP charges"))]
    zoom = "" if window is None else f"  (zoom {window[0]:.4g} to {window[1]:.4g} s of {s.horizon:g} s)"
    if jobs is not None:
        zoom += f"  (job{'s' if len(jobs) > 1 else ''} {', '.join(str(j) for j in jobs)} only)"
    return f"{s.name}: lease timeline{zoom}\n{', '.join(facts)}\nthis run: {', '.join(counts)}"


def auto_window(run, span: float = 120.0, per_lane: float = 14.0) -> tuple[float, float] | None:
    """A window worth looking at: the whole run if it is short, else ~`span` s around the first trouble.

    Trouble is a crash, pause, partition or a lease that expired or was revoked. The window also
    narrows when leases are so dense that bars would be slivers (about `per_lane` leases per lane).
    """
    horizon = float(run.scenario.horizon)
    leases = run.leases
    events = run.events
    if leases.empty:
        return None
    activity_end = float(np.nanmax(np.r_[leases["end"], leases["released_at"], leases["until"]]))
    end = min(horizon, activity_end * 1.03 + 1.0)
    rate = len(leases) / max(end, 1e-9) / max(run.scenario.policy.workers, 1)
    span = min(span, end, max(20.0, per_lane / rate if rate > 0 else span))
    if end <= span * 1.15 and end >= horizon * 0.98:
        return None
    trouble = leases.loc[leases["end_reason"].isin(["crashed", "expired", "revoked"]), "start"]
    marks = events.loc[events["kind"].isin(["crash", "pause_start", "partition_start"]), "t"]
    first = min([*trouble.tolist(), *marks.tolist()], default=None)
    t0 = 0.0 if first is None else max(0.0, first - 0.15 * span)
    t1 = min(end, t0 + span)
    t0 = max(0.0, t1 - span)
    step = 5.0 if span <= 60 else 10.0 if span <= 300 else 60.0
    return (math.floor(t0 / step) * step, min(horizon, math.ceil(t1 / step) * step))


# ==== analysis figures: sweeps, claim strategies, peers ===========================================
#
# These take DataFrames shaped like sim.sweep's: `SweepResult.runs` (one row per run: a column per
# grid key named by its dotted key, `replication`, `seed`, the summary metrics) or
# `SweepResult.aggregate()` (one row per grid point: the keys, `n`, `<metric>_mean`, `_ci_low`,
# `_ci_high`). Given per-run rows they compute the mean and its CI themselves; rates the summary
# does not carry (false_expiry_rate, race_probability, ...) come from sim.stats.RATES.

PALETTE = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#000000")
MARKERS = ("o", "s", "^", "D", "v", "P", "X")
LINESTYLES = ("-", "--", "-.", ":", (0, (5, 1, 1, 1)), (0, (1, 1)), (0, (8, 2)))
HATCHES = ("", "////", "....", "xxxx", "\\\\\\\\", "oo", "++")
KEY_LABELS = {  # dotted key -> (axis label, unit, short label for point annotations)
    "policy.lease_ttl": ("lease TTL", "s", "TTL"),
    "policy.heartbeat_interval": ("heartbeat interval", "s", "hb"),
    "policy.watcher_interval": ("watcher interval", "s", "watcher"),
    "policy.poll_interval": ("poll interval", "s", "poll"),
    "policy.workers": ("workers", "", "workers"),
    "policy.select_to_update_gap": ("select-to-update gap", "s", "gap"),
    "policy.candidates": ("candidates read per claim", "", "candidates"),
    "policy.claim": ("claim strategy", "", ""),
    "faults.crash_rate": ("crash rate", "per worker-hour", "crashes/h"),
    "faults.pause_rate": ("pause rate", "per worker-hour", "pauses/h"),
}
METRIC_LABELS = {  # metric -> (label, unit)
    "recovery_latency_mean": ("mean recovery latency", "s"),
    "recovery_latency_p50": ("median recovery latency", "s"),
    "recovery_latency_p95": ("recovery latency p95", "s"),
    "recovery_latency_p99": ("recovery latency p99", "s"),
    "job_latency_mean": ("mean job latency", "s"),
    "job_latency_p99": ("job latency p99", "s"),
    "false_expiry_rate": ("false-expiry rate", "% of leases"),
    "race_probability": ("race probability", "% of leases double-claimed"),
    "duplicate_charge_rate": ("duplicate PSP charges", "% of jobs"),
    "duplicate_effect_rate": ("duplicate ledger rows", "% of jobs"),
    "recovered_share": ("crashed jobs recovered", "%"),
    "statements_per_s": ("DB load", "statements/s"),
    "throughput_per_s": ("throughput", "jobs/s"),
    "false_expiries": ("false expiries", "per run"),
    "double_claims": ("double claims", "per run"),
    "duplicate_external_effects": ("duplicate PSP charges", "per run"),
    "duplicate_db_effects": ("duplicate ledger rows", "per run"),
    # the advisor's predictions (sim.teaching.advice_frame), not measurements
    "predicted_false_expiry": ("predicted false-expiry probability", "% of jobs"),
    "predicted_recovery_mean": ("predicted mean recovery latency", "s"),
    "predicted_db_load": ("predicted heartbeat + watcher load", "statements/s"),
}
MULTIPLICITY = {  # double_processing's bars: (label, colour, hatch)
    "leases_per_job": ("leases (claims) per job", "#0072B2", ""),
    "charges_per_payment": ("PSP charges per payment", "#E69F00", "////"),
    "ledger_rows_per_payment": ("ledger rows per payment", "#009E73", "...."),
}


def _percent(metric: str) -> bool:
    return "%" in METRIC_LABELS.get(metric, ("", ""))[1]


def metric_label(metric: str) -> str:
    """An axis label with its unit, e.g. 'mean recovery latency (s)'."""
    name, unit = METRIC_LABELS.get(metric, (metric.replace("_", " "), ""))
    return f"{name} ({unit})" if unit else name


def key_label(key: str) -> str:
    name, unit, _ = KEY_LABELS.get(key, (key.rsplit(".", 1)[-1].replace("_", " "), "", ""))
    return f"{name} ({unit})" if unit else name


def setting_text(key: str, value) -> str:
    """'TTL 30 s', 'gap 5 ms', 'workers 8': one setting, short, with its unit."""
    _, unit, short = KEY_LABELS.get(key, ("", "", key.rsplit(".", 1)[-1]))
    if isinstance(value, int | float | np.integer | np.floating) and not isinstance(value, bool):
        value = float(value)
        if unit == "s" and 0 < abs(value) < 1:
            text = f"{value * 1000:g} ms"
        else:
            text = f"{value:g} {unit}".strip()
    else:
        text = str(value)
    return f"{short} {text}".strip()


def format_value(metric: str, value: float) -> str:
    """A metric value for an annotation: percentages for rates, 3 significant digits otherwise."""
    if value is None or not np.isfinite(value):
        return "n/a"
    if _percent(metric):
        return f"{100 * value:.2g}%" if 0 < abs(value) < 0.001 else f"{100 * value:.3g}%"
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"


def metric_table(frame: pd.DataFrame, keys: list[str], metric: str, confidence: float = 0.95) -> pd.DataFrame:
    """`keys` + mean, low, high of `metric`, one row per key combination, sorted by the keys.

    Reads `<metric>_mean/_ci_low/_ci_high` of an aggregated frame, or averages per-run rows; a rate
    missing from an aggregated frame is the ratio of the means of its counts (no interval then).
    Every metric here is >= 0 and rates are <= 1, so the intervals are clipped to that range. `n`
    is the number of runs behind each row (NaN if the frame does not say).
    """
    from sim.stats import RATES, add_rates, summarize

    missing = [k for k in keys if k not in frame.columns]
    if missing:
        raise ConfigError(f"{missing[0]}: not a column of the frame (columns: {', '.join(map(str, frame.columns))})")
    if f"{metric}_mean" in frame.columns:
        out = frame[keys].copy()
        out["n"] = frame["n"] if "n" in frame.columns else np.nan
        out["mean"] = frame[f"{metric}_mean"].astype(float)
        for side in ("low", "high"):
            column = f"{metric}_ci_{side}"
            out[side] = frame[column].astype(float) if column in frame.columns else np.nan
        if keys and out.duplicated(keys).any():
            raise ConfigError(f"{metric}: several rows per {', '.join(keys)}; filter the other grid keys first")
    else:
        per_run = add_rates(frame)
        if metric in per_run.columns:
            agg = summarize(per_run, keys, [metric], confidence)
            out = agg[keys + ["n"]].copy()
            out["mean"], out["low"], out["high"] = (agg[f"{metric}_{s}"] for s in ("mean", "ci_low", "ci_high"))
        elif metric in RATES and all(f"{c}_mean" in frame.columns for c in RATES[metric]):
            num, den = RATES[metric]
            out = frame[keys].copy()
            out["n"] = frame["n"] if "n" in frame.columns else np.nan
            denominator = frame[f"{den}_mean"].astype(float)
            out["mean"] = frame[f"{num}_mean"].astype(float) / denominator.where(denominator > 0)
            out["low"] = out["high"] = np.nan
        else:
            raise ConfigError(f"{metric}: the frame has neither {metric}_mean nor per-run {metric} values")
    out["low"] = out["low"].clip(lower=0.0)
    if _percent(metric):
        out["high"] = out["high"].clip(upper=1.0)
    return out.sort_values(keys).reset_index(drop=True) if keys else out.reset_index(drop=True)


def _new_axes(ax, size):
    if ax is not None:
        return ax
    import matplotlib.pyplot as plt

    _, ax = plt.subplots(figsize=size, layout="constrained")
    return ax


def _finish(ax, title: str, subtitle: str | None = None) -> None:
    ax.set_title(title + (f"\n{subtitle}" if subtitle else ""), loc="left", fontsize=10)
    ax.grid(color="#e6e6e6", lw=0.6)
    ax.set_axisbelow(True)


def _n_text(table: pd.DataFrame, what: str = "point") -> str:
    """'3 runs per point' from metric_table's `n` column."""
    n = table["n"].dropna() if "n" in table.columns else pd.Series(dtype=float)
    if n.empty:
        return f"runs per {what}: not given"
    low, high = int(n.min()), int(n.max())
    runs = f"{low}" if low == high else f"{low}-{high}"
    return f"{runs} run{'s' if high > 1 else ''} per {what}"


# ---- claims and charges per job, by claim strategy ---------------------------------------------

def multiplicity(run) -> dict[str, float]:
    """How many times each job was claimed, and each payment charged and booked (1.0 = exactly once).

    Averaged over the jobs (payments) that were claimed (charged, booked) at least once.
    """
    leases = run.leases.groupby("job").size()
    events = run.events
    charges = events[(events["kind"] == "psp_charge") & (events["detail"] == "new")]
    charges = charges.merge(run.jobs[["job", "event_id"]], on="job").groupby("event_id").size()
    ledger = run.table_ledger.groupby("event_id").size()
    mean = lambda s: float(s.mean()) if len(s) else np.nan  # noqa: E731
    return {"leases_per_job": mean(leases), "charges_per_payment": mean(charges), "ledger_rows_per_payment": mean(ledger)}


def double_processing(runs_by_strategy, ax=None, *, confidence: float = 0.95):
    """Grouped bars per claim strategy: leases per job, PSP charges and ledger rows per payment.

    `runs_by_strategy` maps a label (e.g. the claim strategy) to a Run or a list of Runs (the
    replications). Bars rise from the ideal 1.0 (exactly once), so their height is the excess;
    whiskers are the CI of the mean over replications.
    """
    if not hasattr(runs_by_strategy, "items") or not len(runs_by_strategy):
        raise ConfigError("runs_by_strategy: expected a non-empty mapping of label -> Run or list of Runs")
    from sim.stats import mean_ci

    ax = _new_axes(ax, (9, 4.8))
    labels, counts, tops = [], [], [1.0]
    width = 0.8 / len(MULTIPLICITY)
    for g, (label, runs) in enumerate(runs_by_strategy.items()):
        runs = [runs] if hasattr(runs, "leases") else list(runs)
        if not runs:
            raise ConfigError(f"runs_by_strategy[{label!r}]: no runs")
        values = [multiplicity(r) for r in runs]
        labels.append(f"{label}\n({len(runs)} run{'s' if len(runs) > 1 else ''})")
        counts.append(len(runs))
        for k, (metric, (name, colour, hatch)) in enumerate(MULTIPLICITY.items()):
            mean, low, high, _ = mean_ci([v[metric] for v in values], confidence)
            if not np.isfinite(mean):
                continue
            x = g - 0.4 + width * (k + 0.5)
            bar = ax.bar(x, mean - 1.0, bottom=1.0, width=width * 0.92, color=colour, hatch=hatch,
                         edgecolor=INK, lw=0.7, label=name if g == 0 else None, zorder=3)
            for patch in bar.patches:
                patch.set_gid("bar")
            top = mean
            if np.isfinite(low) and high > low:
                ax.plot([x, x], [low, high], color=INK, lw=1.1, marker="_", ms=7, mew=1.1, zorder=4, gid="ci")
                top = high
            ax.text(x, top, f"{mean:.2f}", ha="center", va="bottom", fontsize=7.5, color=INK, zorder=5,
                    gid="bar-label")
            tops.append(top)
    ax.axhline(1.0, color=INK, ls="--", lw=1.2, zorder=2, gid="ideal", label="1.0 = exactly once (ideal)")
    ax.set_xticks(range(len(labels)), labels)
    span = max(tops) - 1.0
    ax.set_ylim(1.0 - max(0.03, 0.08 * span), max(tops) + max(0.05, 0.12 * span))
    ax.set_ylabel("count per job or payment")
    ax.set_xlabel("claim strategy")
    whisk = f"whiskers: {confidence:.0%} CI of the mean" if max(counts) > 1 else "one run each"
    _finish(ax, "Double processing by claim strategy: how often each job ran, was charged and booked",
            f"bars rise from 1.0 (exactly once): their height is the excess; {whisk}")
    ax.grid(axis="x", visible=False)
    ax.legend(loc="upper right", fontsize=8, frameon=False)
    return ax


# ---- race probability vs workers ---------------------------------------------------------------

def race_probability(frame: pd.DataFrame, ax=None, *, x: str = "policy.workers",
                     by: str | None = "policy.select_to_update_gap", confidence: float = 0.95):
    """Double claims per lease vs `x` (workers), one line per `by` value (select-to-update gap).

    `frame`: per-run rows with double_claims and leases (or race_probability), or an aggregated frame
    with race_probability_mean (and _ci_low/_ci_high for the bands).
    """
    keys = [x] + ([by] if by else [])
    table = metric_table(frame, keys, "race_probability", confidence)
    ax = _new_axes(ax, (8, 4.8))
    groups = list(table.groupby(by, sort=True)) if by else [(None, table)]
    banded = False
    for i, (value, group) in enumerate(groups):
        colour, marker, ls = PALETTE[i % len(PALETTE)], MARKERS[i % len(MARKERS)], LINESTYLES[i % len(LINESTYLES)]
        label = setting_text(by, value) if by else "simulated"
        ax.plot(group[x], 100 * group["mean"], color=colour, marker=marker, ls=ls, lw=1.6, ms=6,
                mec=INK, mew=0.6, label=label, zorder=3, gid="line")
        ci = group[["low", "high"]].notna().all(axis=1)
        if ci.any():
            ax.fill_between(group.loc[ci, x], 100 * group.loc[ci, "low"], 100 * group.loc[ci, "high"],
                            color=colour, alpha=0.16, lw=0, zorder=2, gid="ci-band")
            banded = True
    from matplotlib.ticker import MaxNLocator, PercentFormatter

    ax.yaxis.set_major_formatter(PercentFormatter(100, decimals=None))
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylim(bottom=0)
    ax.set_xlabel(key_label(x))
    ax.set_ylabel("race probability (double claims / leases)")
    band = f"; bands: {confidence:.0%} CI of the mean" if banded else ""
    _finish(ax, "Read-then-write race: share of leases that were double claims", f"{_n_text(table)}{band}")
    if by:
        ax.legend(title=KEY_LABELS.get(by, (by,))[0], fontsize=8, title_fontsize=8, frameon=False, loc="upper left")
    return ax


# ---- recovery latency vs an interval, with the theory -------------------------------------------

def recovery_vs_interval(agg: pd.DataFrame, x: str = "policy.watcher_interval", ax=None, theory=None, *,
                         metric: str = "recovery_latency_mean", theory_label: str = "theory (sim.analytic)",
                         confidence: float = 0.95):
    """Simulated recovery latency (mean, CI band) vs `x` (watcher interval or TTL), beside the theory.

    `theory`: a callable x -> seconds (e.g. a lambda around sim.analytic.recovery_latency_mean),
    drawn as a smooth dashed curve over the swept range; or precomputed values (a Series indexed
    by x, a dict, or a sequence aligned with the sorted x values).
    """
    table = metric_table(agg, [x], metric, confidence)
    ax = _new_axes(ax, (8, 4.8))
    ci = table[["low", "high"]].notna().all(axis=1)
    if ci.any():
        ax.fill_between(table.loc[ci, x], table.loc[ci, "low"], table.loc[ci, "high"], color=PALETTE[0],
                        alpha=0.18, lw=0, zorder=2, gid="ci-band", label=f"{confidence:.0%} CI of the mean")
    ax.plot(table[x], table["mean"], color=PALETTE[0], marker="o", ms=6, mec=INK, mew=0.6, lw=1.6,
            zorder=3, gid="simulated", label="simulated")
    if theory is not None:
        tx, ty = _theory_points(theory, table[x])
        ax.plot(tx, ty, color=PALETTE[5], ls="--", lw=1.8, zorder=4, gid="theory", label=theory_label)
    ax.set_ylim(bottom=0)
    ax.set_xlabel(key_label(x))
    ax.set_ylabel(metric_label(metric))
    what = METRIC_LABELS.get(metric, (metric,))[0]
    _finish(ax, f"Recovery after a crash: {what} vs {KEY_LABELS.get(x, (x,))[0]}",
            f"crash of the owner -> the job claimed again; {_n_text(table)}")
    ax.legend(fontsize=8, frameon=False, loc="upper left")
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
        raise ConfigError(f"theory: expected a callable, a Series, a dict or {len(xs)} values, got {values.shape}")
    return xs, values


# ---- heatmap of one metric over two settings ----------------------------------------------------

def heatmap(agg: pd.DataFrame, x: str = "policy.lease_ttl", y: str = "policy.heartbeat_interval",
            value: str = "false_expiry_rate", ax=None, *, cmap: str | None = None, confidence: float = 0.95):
    """One annotated cell per (x, y) setting, coloured by `value` on a perceptually uniform map.

    Typical values: false_expiry_rate, recovery_latency_p99. Cells without data are hatched grey.
    """
    import matplotlib as mpl
    from matplotlib.colors import Normalize

    table = metric_table(agg, [x, y], value, confidence)
    ax = _new_axes(ax, (7.5, 5.5))
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
            v = np.nan if row is None else row["mean"]
            if np.isfinite(v):
                face = colours(norm(v))
                ax.add_patch(Rectangle((i - 0.5, j - 0.5), 1, 1, facecolor=face, edgecolor="white", lw=1.5, gid="cell"))
                text = format_value(value, v)
                if not big and np.isfinite(row["low"]) and np.isfinite(row["high"]):
                    text += f"\n[{format_value(value, row['low'])}, {format_value(value, row['high'])}]"
                lum = 0.2126 * face[0] + 0.7152 * face[1] + 0.0722 * face[2]
                ax.text(i, j, text, ha="center", va="center", fontsize=7 if big else 8.5, linespacing=1.3,
                        color="white" if lum < 0.45 else INK, gid="cell-label")
            else:
                ax.add_patch(Rectangle((i - 0.5, j - 0.5), 1, 1, facecolor="#f4f4f4", edgecolor="#bbbbbb",
                                       hatch="////", lw=0.8, gid="cell-missing"))
                ax.text(i, j, "no data", ha="center", va="center", fontsize=7, color="#666666", gid="cell-label")
    ax.set_xlim(-0.5, len(xs) - 0.5)
    ax.set_ylim(-0.5, len(ys) - 0.5)
    ax.set_xticks(range(len(xs)), [f"{v:g}" if isinstance(v, int | float) else str(v) for v in xs])
    ax.set_yticks(range(len(ys)), [f"{v:g}" if isinstance(v, int | float) else str(v) for v in ys])
    ax.tick_params(length=0)
    for side in ax.spines.values():
        side.set_visible(False)
    ax.set_xlabel(key_label(x))
    ax.set_ylabel(key_label(y))
    bar = ax.figure.colorbar(mpl.cm.ScalarMappable(norm=norm, cmap=colours), ax=ax, fraction=0.05, pad=0.02)
    bar.set_label(metric_label(value))
    if _percent(value):
        from matplotlib.ticker import PercentFormatter

        bar.ax.yaxis.set_major_formatter(PercentFormatter(1.0, decimals=None))
    what = METRIC_LABELS.get(value, (value,))[0]
    ci = "" if big or not table[["low", "high"]].notna().any().any() else f" [{confidence:.0%} CI]"
    _finish(ax, f"{what[:1].upper()}{what[1:]} by {KEY_LABELS.get(x, (x,))[0]} and {KEY_LABELS.get(y, (y,))[0]}",
            f"cell: mean{ci}; {_n_text(table, 'cell')}")
    ax.grid(False)
    return ax


# ---- the trade-off: recovery latency vs false-expiry risk, sized by DB load ---------------------

def pareto_front(x, y) -> np.ndarray:
    """Boolean mask of the points no other point beats on both x and y (lower is better; NaN: never)."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    ok = np.isfinite(x) & np.isfinite(y)
    front = ok.copy()
    for i in np.flatnonzero(ok):
        better = ok & (x <= x[i]) & (y <= y[i]) & ((x < x[i]) | (y < y[i]))
        front[i] = not better.any()
    return front


LOG_DECADES = 2.0  # tradeoff(logx=None) turns to a log x axis when positive x values span more decades


def tradeoff(agg: pd.DataFrame, ax=None, *, x: str = "false_expiry_rate", y: str = "recovery_latency_mean",
             size: str = "statements_per_s", keys: list[str] | None = None, confidence: float = 0.95,
             logx: bool | None = None):
    """The Pareto chart of settings: recovery latency vs false-expiry risk, marker size and shade = DB load.

    Each point is one setting (a row of a sweep's aggregate, identified by its dotted grid keys or
    `keys`), labelled with those settings. The frontier (settings no other setting beats on both
    axes) is circled and joined by a dashed staircase; whiskers show CIs when the frame has them.
    logx: a log x axis; None (default) chooses one when the positive x values span more than two
    decades. A log axis has no 0, so settings with x = 0 (and intervals reaching 0) are drawn on a
    dotted line at its left edge, labelled 0 on the axis and in the legend, rather than dropped;
    the frontier is computed on the true values.
    """
    import matplotlib as mpl
    from matplotlib.colors import Normalize

    if logx is not None and not isinstance(logx, bool | np.bool_):
        raise ConfigError(f"logx: expected True, False or None (automatic), got {logx!r}")
    keys = keys if keys is not None else [c for c in agg.columns if isinstance(c, str) and "." in c]
    if not keys:
        raise ConfigError("tradeoff: the frame has no dotted grid-key columns; pass keys=[...]")
    tx = metric_table(agg, keys, x, confidence)
    ty = metric_table(agg, keys, y, confidence)
    ts = metric_table(agg, keys, size, confidence)
    points = tx.rename(columns={c: f"{c}_x" for c in ("mean", "low", "high")})
    for table, tag in ((ty, "y"), (ts, "s")):
        points = points.merge(table.rename(columns={c: f"{c}_{tag}" for c in ("mean", "low", "high")}), on=keys)
    px, py, ps = (points[c].to_numpy(dtype=float) for c in ("mean_x", "mean_y", "mean_s"))
    shown = np.isfinite(px) & np.isfinite(py)
    log = _spans_decades(px[shown], LOG_DECADES) if logx is None else bool(logx)
    if log and not (px[shown] > 0).any():
        raise ConfigError(f"logx: no setting has a positive {x}; a log axis needs some")
    edge = _zero_edge(px[shown], points.loc[shown, ["low_x", "high_x"]].to_numpy(dtype=float)) if log else None
    dx = np.where(px > 0, px, edge) if edge is not None else px  # where each point is drawn
    ax = _new_axes(ax, (9, 6))
    if log:
        ax.set_xscale("log")
    finite_s = ps[np.isfinite(ps)]
    s_low, s_high = (finite_s.min(), finite_s.max()) if len(finite_s) else (0.0, 1.0)
    if s_high <= s_low:
        s_high = s_low + (abs(s_low) * 0.1 or 1.0)
    areas = 40 + 360 * np.clip((np.nan_to_num(ps, nan=s_low) - s_low) / (s_high - s_low), 0, 1)
    norm = Normalize(s_low, s_high)
    colours = mpl.colormaps["cividis"]
    for i in np.flatnonzero(shown):
        if np.isfinite(points["low_y"].iat[i]) and np.isfinite(points["high_y"].iat[i]):
            ax.plot([dx[i]] * 2, [points["low_y"].iat[i], points["high_y"].iat[i]], color="#b0b0b0", lw=0.8, zorder=1, gid="ci")
        if np.isfinite(points["low_x"].iat[i]) and np.isfinite(points["high_x"].iat[i]):
            ends = [points["low_x"].iat[i], points["high_x"].iat[i]]
            if log:  # an interval reaching 0 reaches the dotted line
                ends = [v if v > 0 else edge for v in ends]
            ax.plot(ends, [py[i]] * 2, color="#b0b0b0", lw=0.8, zorder=1, gid="ci")
    ax.scatter(dx[shown], py[shown], s=areas[shown], c=ps[shown], cmap=colours, norm=norm, edgecolors=INK,
               linewidths=0.7, alpha=0.9, zorder=3, gid="point")
    front = pareto_front(px, py)
    order = np.flatnonzero(front)[np.argsort(px[front], kind="stable")]
    if len(order):
        ax.plot(dx[order], py[order], drawstyle="steps-post", color=INK, ls="--", lw=1.2, zorder=2, gid="frontier")
        ax.scatter(dx[order], py[order], s=areas[order] + 160, facecolors="none", edgecolors=INK, linewidths=1.8,
                   zorder=4, gid="frontier-point")
    bar = ax.figure.colorbar(mpl.cm.ScalarMappable(norm=norm, cmap=colours), ax=ax, fraction=0.05, pad=0.02)
    bar.set_label(f"{metric_label(size)}: marker size and shade")
    ax.set_xlabel(metric_label(x) + "  (risk: lower is better" + ("; log scale)" if log else ")"))
    ax.set_ylabel(metric_label(y) + "  (lower is better)")
    ax.set_ylim(bottom=0)
    if shown.any():  # room on the right for the labels
        if log:
            low, high = np.log10(min(dx[shown].min(), edge or np.inf)), np.log10(dx[shown].max())
            span = max(high - low, 1.0)
            ax.set_xlim(10 ** (low - 0.06 * span), 10 ** (high + 0.24 * span))
        else:
            ax.set_xlim(min(0.0, px[shown].min()) - _pad(px[shown]), px[shown].max() + 4 * _pad(px[shown]))
    _x_ticks(ax, x, log, edge)
    label_all = shown.sum() <= 24
    chosen = [i for i in np.flatnonzero(shown) if label_all or front[i]]
    texts = [", ".join(setting_text(k, points[k].iat[i]) for k in keys) for i in chosen]
    _place_labels(ax, dx[chosen], py[chosen], texts, front[chosen])
    handles = [Line2D([], [], ls="none", marker="o", ms=13, mfc="none", mec=INK, mew=1.8),
               Line2D([], [], color=INK, ls="--", lw=1.2)]
    names = ["Pareto frontier: no other setting is better on both axes", "frontier staircase"]
    if edge is not None:
        ax.axvline(edge, color="#888888", ls=":", lw=1.2, zorder=1, gid="zero-line")
        handles.append(Line2D([], [], color="#888888", ls=":", lw=1.2))
        sign = "=" if (px[shown] >= 0).all() else "<="
        names.append(f"on the dotted line: {METRIC_LABELS.get(x, (x.replace('_', ' '),))[0]} {sign} 0 "
                     "(a log axis has no 0)")
    ax.legend(handles, names, fontsize=8, frameon=False, loc="upper right")
    _finish(ax, "Trade-off: recovery latency vs false-expiry risk (bottom left is better)",
            f"each point is one setting; {_n_text(ty)}" + ("; grey whiskers: 95% CIs" if any(
                a.get_gid() == "ci" for a in ax.lines) else ""))
    return ax


def _spans_decades(values, decades: float) -> bool:
    """Whether the positive finite values span more than `decades` powers of ten."""
    values = np.asarray(values, dtype=float)
    positive = values[np.isfinite(values) & (values > 0)]
    return len(positive) >= 2 and positive.max() > positive.min() * 10 ** decades


def _zero_edge(means, interval_ends) -> float | None:
    """Where a log axis draws x <= 0: half a decade left of every positive mean and interval end
    (so that order is kept); None when no mean or interval reaches 0."""
    values = np.concatenate([np.ravel(means), np.ravel(interval_ends)]).astype(float)
    values = values[np.isfinite(values)]
    if not (values <= 0).any():
        return None
    return float(values[values > 0].min()) / 10 ** 0.5


def _x_ticks(ax, metric: str, log: bool, edge: float | None) -> None:
    """Percent tick labels for rates. A log axis labels decades (also 2 and 5 when it spans fewer
    than two), and a dotted line for x = 0 at `edge` is labelled 0 instead of the ticks near it."""
    percent = _percent(metric)
    if not log:
        if percent:
            from matplotlib.ticker import PercentFormatter

            ax.xaxis.set_major_formatter(PercentFormatter(1.0, decimals=None))
        return
    import matplotlib as mpl
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    low, high = ax.get_xlim()
    ax.xaxis.set_major_locator(LogLocator(subs=(1.0,) if high > 100 * low else (1.0, 2.0, 5.0)))
    cut = edge * 10 ** 0.25 if edge is not None else 0.0  # halfway to the smallest positive value

    def label(v, _):
        return "" if v < cut else (f"{100 * v:.4g}%" if percent else f"{v:g}")

    ax.xaxis.set_major_formatter(FuncFormatter(label))
    ax.xaxis.set_minor_formatter(NullFormatter())
    if edge is not None:
        ax.annotate("0%" if percent else "0", (edge, 0), xycoords=ax.get_xaxis_transform(), xytext=(0, -7),
                    textcoords="offset points", ha="center", va="top", fontsize=mpl.rcParams["xtick.labelsize"],
                    color=INK, gid="zero-label")


def _place_labels(ax, xs, ys, texts, bold) -> None:
    """Label points to their right, stacking labels that would overlap (greedy, in display space)."""
    if not len(texts):
        return
    scale = 72.0 / ax.figure.dpi  # display pixels -> points
    where = ax.transData.transform(np.column_stack([xs, ys]))
    step = 11.0 / scale  # one 7.5 pt label line, in pixels
    placed: list[tuple[float, float]] = []
    for i in np.argsort(where[:, 1], kind="stable"):
        x, y = where[i]
        level = y + 4.0 / scale
        for px_, py_ in placed:
            if abs(px_ - x) < 160.0 / scale and py_ - step < level < py_ + step:
                level = py_ + step
        placed.append((x, level))
        dy = (level - y) * scale
        ax.annotate(texts[i], (xs[i], ys[i]), xytext=(10, dy), textcoords="offset points", fontsize=7.5,
                    va="center", fontweight="bold" if bold[i] else "normal", color=INK, zorder=5, gid="point-label",
                    bbox={"boxstyle": "round,pad=0.12", "facecolor": "white", "alpha": 0.8, "lw": 0},
                    arrowprops={"arrowstyle": "-", "color": "#999999", "lw": 0.6, "shrinkA": 0, "shrinkB": 4}
                    if dy > 12 else None)


def _pad(values) -> float:
    finite = np.asarray(values, dtype=float)
    finite = finite[np.isfinite(finite)]
    if not len(finite):
        return 0.01
    span = finite.max() - finite.min()
    return 0.06 * span if span > 0 else 0.06 * (abs(finite.max()) or 1.0)


# ---- peers ---------------------------------------------------------------------------------------

RECOVERY_STYLES = {  # sim.peers.recovery_mechanism -> (colour, hatch, legend text)
    "watcher requeues": ("#0072B2", "", "a watcher requeues the expired job"),
    "claim takes expired": ("#E69F00", "////", "the claim itself takes the expired job"),
    "watcher fails the job": ("#CC79A7", "xxxx", "the expired job is failed, not re-run"),
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
_TIME_TICKS = ((1, "1 s"), (10, "10 s"), (60, "1 min"), (300, "5 min"), (900, "15 min"), (3600, "1 h"),
               (4 * 3600, "4 h"), (24 * 3600, "1 day"))


def human_duration(seconds: float) -> str:
    """'24.6 s', '15.3 min', '4 h'."""
    if seconds is None or not np.isfinite(seconds):
        return "n/a"
    if seconds >= 3600 and seconds % 3600 == 0:
        return f"{seconds / 3600:g} h"
    if seconds < 90:
        return f"{seconds:.3g} s"
    if seconds < 5400:
        return f"{seconds / 60:.3g} min"
    return f"{seconds / 3600:.3g} h"


def peer_settings(row) -> str:
    """'lease 1 h, no heartbeat, watcher 30 s' from a compare_peers row."""
    beat = row.get("heartbeat_interval", np.nan)
    watch = row.get("watcher_interval", np.nan)
    parts = [f"lease {human_duration(row['lease_ttl'])}",
             "no heartbeat" if not np.isfinite(beat) else f"heartbeat {human_duration(beat)}",
             "no watcher" if not np.isfinite(watch) else f"watcher {human_duration(watch)}"]
    return ", ".join(parts)


def peer_comparison(frame: pd.DataFrame, ax=None, *, metric: str = "recovery_latency_mean",
                    columns=PEER_COLUMNS):
    """One bar per peer (sim.peers.compare_peers): `metric` on a log time axis, CI whiskers,
    hatched by how the peer recovers an expired lease; per-run means of `columns` on the right."""
    needed = {"label", "recovery", "lease_ttl", f"{metric}_mean"}
    if not needed <= set(frame.columns):
        raise ConfigError(f"peer_comparison: expected a sim.peers.compare_peers frame with {', '.join(sorted(needed))}")
    from matplotlib.ticker import FixedLocator, NullLocator
    from matplotlib.transforms import ScaledTranslation, blended_transform_factory

    # the columns sit right of the axes at fixed offsets in inches; constrained layout makes room
    ax = _new_axes(ax, (10 + 0.8 * len(columns), 1.6 + 0.75 * len(frame)))
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
            ax.barh(y, means[y] - left, left=left, height=0.62, color=colour, hatch=hatch, edgecolor=INK, lw=0.7,
                    zorder=3, gid="bar")
            end = means[y]
            if np.isfinite(low[y]) and np.isfinite(high[y]) and high[y] > low[y]:
                ax.plot([max(low[y], left), high[y]], [y, y], color=INK, lw=1.2, marker="|", ms=9, mew=1.2,
                        zorder=4, gid="ci")
                end = max(end, high[y])
            ax.text(end * 1.12, y, human_duration(means[y]), va="center", ha="left", fontsize=8.5,
                    color=INK, zorder=5, gid="bar-label")
        else:
            detected = row.get("detection_latency_mean_mean", np.nan)
            note = "never re-run"
            if row["recovery"] == "watcher fails the job":
                note += f": the crashed job is marked failed after ~{human_duration(detected)}" if np.isfinite(detected) \
                    else ": the crashed job is marked failed"
            ax.text(left * 1.15, y, note, va="center", ha="left", fontsize=8.5, color=INK, style="italic",
                    zorder=5, gid="no-bar",
                    bbox={"boxstyle": "square,pad=0.3", "facecolor": "white", "edgecolor": colour, "ls": "--",
                          "lw": 1.2})
    ax.set_xscale("log")
    ax.set_xlim(left, right)
    ticks = [(t, s) for t, s in _TIME_TICKS if left <= t <= right]
    ax.xaxis.set_major_locator(FixedLocator([t for t, _ in ticks]))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xticklabels([s for _, s in ticks])
    ax.set_ylim(len(rows) - 0.5, -0.5)
    ax.set_yticks(range(len(rows)), [f"{r['label']}\n{peer_settings(r)}" for _, r in rows.iterrows()], fontsize=8.5)
    ax.tick_params(axis="y", length=0)
    name = METRIC_LABELS.get(metric, (metric,))[0]
    ax.set_xlabel(f"{name}: the owner crashes -> another worker claims the job (log scale)")
    edge = blended_transform_factory(ax.transAxes, ax.transData)
    for k, (column, header) in enumerate(columns):
        shift = ScaledTranslation(0.5 + 0.8 * k, 0, ax.figure.dpi_scale_trans)
        ax.text(1.0, -0.62, header, transform=edge + shift, ha="center", va="bottom", fontsize=8,
                fontweight="bold", color=INK, gid="column-header")
        values = rows.get(f"{column}_mean", pd.Series(np.nan, index=rows.index))
        for y, value in enumerate(values):
            ax.text(1.0, y, format_value(column, value), transform=edge + shift, ha="center", va="center",
                    fontsize=8.5, color=INK, gid="cell-text")
    n = rows["n"].dropna() if "n" in rows else pd.Series(dtype=float)
    seeds = f"{count(int(n.min()), 'seed')} per peer" if len(n) else "seeds: not given"
    confidence = frame.attrs.get("confidence", 0.95)
    _finish(ax, f"Peer queues' default recovery settings on one payment workload: {name}",
            f"{seeds}; whiskers: {confidence:.0%} CI of the mean; right: means per run")
    ax.grid(axis="y", visible=False)
    ax.legend(list(seen.values()), list(seen), loc="lower right", fontsize=8, frameon=True, framealpha=0.9,
              title="how an expired lease comes back", title_fontsize=8)
    return ax
