"""The lease timeline of one finished Run (who held which job when), and the windows worth showing
(auto_window, busy_window); the lease clock is sim.plots.clock's.

    import sim
    from sim.plots import lease_timeline
    lease_timeline(sim.run("gc-pause-zombie"))

Every function takes ax= and returns the Axes.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.lines import Line2D
from matplotlib.patches import Patch, Rectangle

from sim.errors import ConfigError
from sim.plots.style import (
    ANNOTATION_PT,
    BAR_HEIGHT,
    END_STYLES,
    INK,
    JOB_COLOURS,
    OVERLAP,
    new_axes,
)
from sim.scenario.settings import LOCK_TTL
from sim.support.in_words import count, plural


def lease_timeline(
    run,
    ax=None,
    *,
    window: tuple[float, float] | None = None,
    workers: int | Iterable[int | str] | None = None,
    jobs: int | Iterable[int] | None = None,
):
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
    ax = new_axes(ax, (13, 1.9 + 0.42 * n_rows))
    y_of = {name: i for i, name in enumerate(lanes)}
    events = run.events
    events = events[(events["t"] >= t0) & (events["t"] <= t1)]
    legend: dict[str, object] = {}

    _draw_spans(ax, run.events, y_of, t0, t1, float(scenario.horizon), legend)
    leases = run.leases
    tail_end = leases["released_at"].fillna(leases["end"]).clip(lower=leases["end"])
    visible = (
        leases["worker"].isin(lanes)
        & (leases["start"] <= t1)
        & (np.maximum(tail_end, leases["until"]) >= t0)
    )
    if only is not None:
        visible &= leases["job"].isin(only)
    overlapping = _overlapping(leases)
    span = t1 - t0
    for i, lease in zip(
        np.flatnonzero(visible.to_numpy()), leases[visible].to_dict("records"), strict=True
    ):
        _draw_lease(
            ax, lease, y_of[lease["worker"]], float(tail_end.iloc[i]), overlapping[i], span, legend
        )
    _draw_links(
        ax, leases if only is None else leases[leases["job"].isin(only)], y_of, t0, t1, legend
    )
    _draw_marks(
        ax,
        events if only is None else events[events["job"].isin(only)],
        y_of,
        _charged_twice(run.events),
        legend,
    )
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
    ax.legend(
        [legend[k] for k in order],
        order,
        loc="upper left",
        bbox_to_anchor=(1.005, 1.0),
        fontsize=ANNOTATION_PT,
        frameon=False,
        borderaxespad=0.0,
        handlelength=2.4,
        handleheight=1.2,
    )
    return ax


# ---- pieces --------------------------------------------------------------------------------------


def _draw_lease(
    ax, lease, y: float, tail_end: float, overlapping: bool, span: float, legend
) -> None:
    start, end, reason = float(lease["start"]), float(lease["end"]), lease["end_reason"]
    hatch, label = END_STYLES.get(reason, ("", reason))
    colour = JOB_COLOURS[int(lease["job"]) % len(JOB_COLOURS)]
    top = y - BAR_HEIGHT / 2
    ax.add_patch(
        Rectangle(
            (start, top),
            end - start,
            BAR_HEIGHT,
            facecolor=colour,
            edgecolor=INK,
            lw=0.6,
            hatch=hatch,
            zorder=3,
            gid="lease",
        )
    )
    legend.setdefault(label, Patch(facecolor="white", edgecolor=INK, lw=0.6, hatch=hatch))
    if reason in ("expired", "revoked") and tail_end > end:
        # the owner does not know yet: it keeps working on a lease it no longer has
        ax.add_patch(
            Rectangle(
                (end, top + 0.12),
                tail_end - end,
                BAR_HEIGHT - 0.24,
                facecolor=colour,
                alpha=0.35,
                edgecolor=colour,
                lw=0.8,
                ls=(0, (2, 2)),
                zorder=2,
                gid="zombie",
            )
        )
        legend.setdefault(
            _ZOMBIE, Patch(facecolor="#bbbbbb", alpha=0.6, edgecolor="#888888", ls=(0, (2, 2)))
        )
    if reason == "crashed" and lease["until"] > end:
        ax.plot([end, lease["until"]], [y, y], color=INK, lw=1.1, zorder=2, gid="db-lease")
        ax.plot(
            [lease["until"]], [y], marker="|", ms=9, mew=1.6, color=INK, zorder=2, gid="db-lease"
        )
        legend.setdefault(_DB_LEASE, Line2D([], [], color=INK, lw=1.1, marker="|", ms=9, mew=1.6))
    if overlapping:
        right = max(end, tail_end)
        ax.add_patch(
            Rectangle(
                (start, top - 0.06),
                right - start,
                BAR_HEIGHT + 0.12,
                fill=False,
                edgecolor=OVERLAP,
                lw=2.0,
                zorder=5,
                gid="overlap",
            )
        )
        legend.setdefault(_OVERLAP, Patch(facecolor="none", edgecolor=OVERLAP, lw=2.0))
    attempt = int(lease["attempt"])
    text = f"j{int(lease['job'])}" + (f" #{attempt}" if attempt > 1 else "")
    if end - start >= (0.012 + 0.0084 * len(text)) * span:  # room for the label inside the bar
        ax.text(
            start + 0.004 * span,
            y,
            text,
            va="center",
            ha="left",
            fontsize=ANNOTATION_PT,
            color=INK,
            zorder=4,
            clip_on=True,
            bbox={"boxstyle": "square,pad=0.1", "facecolor": "white", "alpha": 0.7, "lw": 0},
        )


def _draw_links(ax, leases: pd.DataFrame, y_of: dict, t0: float, t1: float, legend) -> None:
    """Dotted arrows from a lost lease to the job's next claim; red dashes for double claims."""
    ordered = leases.sort_values(["job", "start"], kind="stable").reset_index(drop=True)
    previous = ordered.shift(1)
    lanes = list(y_of)
    follows = (
        (previous["job"] == ordered["job"])
        & ordered["worker"].isin(lanes)
        & previous["worker"].isin(lanes)
        & (ordered["start"] >= t0)
        & previous["end_reason"].isin(["revoked", "crashed", "expired", "released"])
    )
    for k in np.flatnonzero(follows.to_numpy(dtype=bool)):
        prev, nxt = previous.iloc[k], ordered.iloc[k]
        y_prev, y_next = y_of[prev["worker"]], y_of[nxt["worker"]]
        if prev["end_reason"] == "revoked":
            if prev["revoked_by"] == nxt["worker"] and nxt["start"] <= t1:
                ax.plot(
                    [nxt["start"]] * 2,
                    [y_prev, y_next],
                    color=OVERLAP,
                    lw=1.0,
                    ls=(0, (3, 2)),
                    zorder=6,
                    gid="double-claim",
                )
                ax.plot(
                    [nxt["start"]],
                    [y_next],
                    marker="o",
                    ms=4,
                    color=OVERLAP,
                    zorder=6,
                    gid="double-claim",
                )
                legend.setdefault(
                    _DOUBLE, Line2D([], [], color=OVERLAP, lw=1.0, ls=(0, (3, 2)), marker="o", ms=4)
                )
            continue
        source = prev["until"] if prev["end_reason"] == "crashed" else prev["end"]
        if source > t1 or nxt["start"] > t1 + (t1 - t0):
            continue
        ax.annotate(
            "",
            xy=(nxt["start"], y_next),
            xytext=(source, y_prev),
            arrowprops={
                "arrowstyle": "->",
                "color": INK,
                "lw": 0.9,
                "ls": ":",
                "shrinkA": 2,
                "shrinkB": 2,
            },
            zorder=6,
            gid="reclaim",
        )
        legend.setdefault(_RECLAIM, Line2D([], [], color=INK, lw=0.9, ls=":"))
        if prev["end_reason"] == "crashed":  # the recovery latency, crash to re-claim
            ax.annotate(
                f"recovery {nxt['start'] - prev['end']:.3g} s",
                (nxt["start"], y_next + BAR_HEIGHT / 2),
                xytext=(-2, -1),
                textcoords="offset points",
                ha="right",
                va="top",
                fontsize=ANNOTATION_PT,
                color=INK,
                zorder=6,
                annotation_clip=True,
                gid="recovery",
                bbox={"boxstyle": "round,pad=0.15", "facecolor": "white", "alpha": 0.8, "lw": 0},
            )


def _draw_marks(ax, events: pd.DataFrame, y_of: dict, charged_twice: set, legend) -> None:
    mine = events[events["worker"].isin(list(y_of))]
    y = mine["worker"].map(y_of)
    charges = (
        (mine["kind"] == "psp_charge") & (mine["detail"] == "new") & mine["job"].isin(charged_twice)
    )
    if charges.any():
        ax.plot(
            mine.loc[charges, "t"],
            y[charges] + BAR_HEIGHT / 2 + 0.14,
            ls="none",
            marker=r"$\$$",
            ms=8,
            color=INK,
            zorder=4,
            gid="charge",
        )
        legend.setdefault(_CHARGE, Line2D([], [], ls="none", marker=r"$\$$", ms=8, color=INK))
    beats = mine["kind"] == "heartbeat"
    if beats.any():
        ax.plot(
            mine.loc[beats, "t"],
            y[beats] - BAR_HEIGHT / 2 - 0.09,
            ls="none",
            marker="|",
            ms=5,
            mew=1.0,
            color=INK,
            zorder=4,
            gid="heartbeat",
        )
        legend.setdefault(
            _HEARTBEAT, Line2D([], [], ls="none", marker="|", ms=7, mew=1.0, color=INK)
        )
    lost = mine["kind"] == "heartbeat_lost"
    if lost.any():
        ax.plot(
            mine.loc[lost, "t"],
            y[lost] - BAR_HEIGHT / 2 - 0.09,
            ls="none",
            marker="|",
            ms=5,
            mew=1.0,
            color="#999999",
            zorder=4,
            gid="heartbeat-lost",
        )
        legend.setdefault(
            _HEARTBEAT_LOST, Line2D([], [], ls="none", marker="|", ms=7, mew=1.0, color="#999999")
        )
    refused = mine["kind"].isin(["heartbeat_rejected", "complete_rejected"])
    if refused.any():
        ax.plot(
            mine.loc[refused, "t"],
            y[refused],
            ls="none",
            marker="o",
            ms=8,
            mew=1.6,
            mfc="white",
            color=INK,
            zorder=7,
            gid="refused",
        )
        legend.setdefault(
            _REFUSED, Line2D([], [], ls="none", marker="o", ms=7, mew=1.6, mfc="white", color=INK)
        )
    crashes = mine["kind"] == "crash"
    if crashes.any():
        ax.plot(
            mine.loc[crashes, "t"],
            y[crashes],
            ls="none",
            marker="x",
            ms=10,
            mew=2.4,
            color=INK,
            zorder=7,
            gid="crash",
        )
        legend.setdefault(_CRASH, Line2D([], [], ls="none", marker="x", ms=8, mew=2.2, color=INK))


def _draw_watcher(ax, events: pd.DataFrame, y: float, legend) -> None:
    ticks = events[events["kind"] == "watcher_tick"]
    moved = pd.to_numeric(ticks["detail"], errors="coerce").fillna(0)
    quiet, busy = ticks[moved == 0], ticks[moved > 0]
    if not quiet.empty:
        ax.plot(
            quiet["t"],
            np.full(len(quiet), y),
            ls="none",
            marker="|",
            ms=6,
            mew=0.8,
            color="#9a9a9a",
            zorder=3,
            gid="watcher-tick",
        )
        legend.setdefault(
            _WATCHER, Line2D([], [], ls="none", marker="|", ms=6, mew=0.8, color="#9a9a9a")
        )
    if not busy.empty:
        ax.plot(
            busy["t"],
            np.full(len(busy), y),
            ls="none",
            marker="|",
            ms=16,
            mew=2.6,
            color=INK,
            zorder=4,
            gid="watcher-requeue",
        )
        for t, n in zip(busy["t"], moved[moved > 0], strict=True):
            ax.annotate(
                f"{int(n)}",
                (t, y),
                xytext=(4, 4),
                textcoords="offset points",
                fontsize=ANNOTATION_PT,
                color=INK,
                va="bottom",
            )
        legend.setdefault(
            _WATCHER_BUSY, Line2D([], [], ls="none", marker="|", ms=12, mew=2.6, color=INK)
        )


def _draw_spans(
    ax, events: pd.DataFrame, y_of: dict, t0: float, t1: float, horizon: float, legend
) -> None:
    """Shade each lane while its worker is paused, partitioned from the DB,
    or down after a crash."""
    styles: dict[str, tuple[dict[str, Any], str]] = {
        "pause": ({"facecolor": "#8c8c8c", "alpha": 0.35, "lw": 0}, _PAUSE),
        "partition": (
            {"facecolor": "#cfe3f3", "edgecolor": "#7a9ab5", "hatch": "..", "lw": 0},
            _PARTITION,
        ),
        "down": ({"facecolor": "#000000", "alpha": 0.07, "lw": 0}, _DOWN),
    }
    pairs = {
        "pause_start": ("pause", True),
        "pause_end": ("pause", False),
        "partition_start": ("partition", True),
        "partition_end": ("partition", False),
        "crash": ("down", True),
        "restart": ("down", False),
    }
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
    _ZOMBIE,
    _DB_LEASE,
    _OVERLAP,
    _DOUBLE,
    _RECLAIM,
    _HEARTBEAT,
    _HEARTBEAT_LOST,
    _CHARGE,
    _REFUSED,
    _CRASH,
    _PAUSE,
    _PARTITION,
    _DOWN,
    _WATCHER,
    _WATCHER_BUSY,
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


def _timeline_name(name: str) -> str:
    """'baseline: lease timeline'; a scenario named after what it shows reads 'lease timeline' or
    'lock timeline', not 'lease: lease timeline'."""
    return (
        f"{name} timeline"
        if name in ("lease", "lock", "lease timeline")
        else f"{name}: lease timeline"
    )


def _title(run, window, jobs: list[int] | None = None) -> str:
    s, p = run.scenario, run.scenario.policy
    summary = run.summary
    beat = f"heartbeat every {p.heartbeat_interval:g} s" if p.heartbeat else "no heartbeat"
    watch = f"watcher every {p.watcher_interval:g} s" if p.watcher else "no watcher"
    ttl = (
        "no TTL (a lock: claims never expire)"
        if p.lease_ttl >= LOCK_TTL
        else f"TTL {p.lease_ttl:g} s"
    )
    facts = [
        f"claim={p.claim}",
        ttl,
        beat,
        watch,
        "fenced" if p.fencing else "unfenced",
        f"seed {s.seed}",
        run.backend,
    ]
    counts = [
        count(int(summary[key]), one, many)
        for key, one, many in (
            ("leases", "lease", "leases"),
            ("false_expiries", "false expiry", "false expiries"),
            ("double_claims", "double claim", "double claims"),
            ("crashes", "crash", "crashes"),
            ("duplicate_external_effects", "duplicate PSP charge", "duplicate PSP charges"),
        )
    ]
    zoom = (
        ""
        if window is None
        else f"  (zoom {window[0]:.4g} to {window[1]:.4g} s of {s.horizon:g} s)"
    )
    if jobs is not None:
        zoom += f"  ({plural(len(jobs), 'job')} {', '.join(str(j) for j in jobs)} only)"
    return f"{_timeline_name(s.name)}{zoom}\n{', '.join(facts)}\nthis run: {', '.join(counts)}"


def auto_window(run, span: float = 120.0, per_lane: float = 14.0) -> tuple[float, float] | None:
    """A window worth looking at: the whole run if it is short, else ~`span` s around the first
    trouble.

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


def save_timeline(run, path):
    """The lease timeline, zoomed to the interesting part of long runs, as a PNG."""
    from matplotlib.figure import Figure

    rows = min(run.scenario.policy.workers, 24) + 1
    fig = Figure(figsize=(13, 1.9 + 0.42 * rows), layout="constrained")
    ax = fig.add_subplot()
    lease_timeline(run, ax, window=auto_window(run), workers=min(run.scenario.policy.workers, 24))
    fig.savefig(path, dpi=110)
    return path


def busy_window(run, pad: float = 4.0) -> tuple[float, float]:
    """(0, a little after the last lease, DB lease or outage ended): where a small run happens."""
    leases = run.leases
    ends = [0.0]
    if len(leases):
        ends += [
            float(np.nanmax(leases["end"])),
            float(np.nanmax(leases["released_at"].fillna(0.0))),
        ]
        finite = leases["until"][leases["until"] < run.scenario.horizon]
        if len(finite):
            ends.append(float(finite.max()))
    events = run.events
    marks = events.loc[events["kind"].isin(["pause_end", "partition_end", "crash"]), "t"]
    if len(marks):
        ends.append(float(marks.max()))
    return 0.0, min(float(run.scenario.horizon), max(ends) + pad)
