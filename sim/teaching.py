"""What the teaching notebooks (notebooks/NN-*.ipynb) need beyond the rest of `sim`.

The notebooks narrate and call; everything with logic lives here, with tests
(tests/test_teaching.py):

- sizing: `fast_mode()` and `size(full, fast)` shrink horizons, jobs and replications when
  LEASELAB_FAST=1 (CI), `setup()` sets the plotting defaults of a notebook;
- prose: `md()` shows computed text (the notebooks never type a number into prose);
- small scenarios the lessons share: `one_job()`, `recovery_experiment()`, and `busy_window()`;
- figures: `lease_clock()` (seconds left on a lease), `plot_contention()`, `plot_retention()`;
- interactive: `explore()` re-runs a small scenario when a slider moves and redraws its timeline;
  headless (no widget frontend) it runs once with the defaults and shows a static figure;
- the database by hand: `Script` drives a Backend statement by statement with a transcript,
  `Delivery` is seed 2's dedup transaction, `retention_experiment()` purges dedup markers;
- PostgreSQL: `sql_frame()` queries a PostgresBackend's schema, `compare_logs()` compares runs;
- exercises: `check_*()` tell the reader whether an answer is right (a `Verdict`);
- coverage: `REQUIRED_TAGS`, `coverage()` map the seed's concepts and checklist to notebook cells.
"""

from __future__ import annotations

import json
import math
import os
import time
import warnings
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd

from sim.db.base import Backend, Blocked
from sim.db.queries import QUERY_DEFAULTS, get_query
from sim.dists import Dist
from sim.errors import ConfigError
from sim.scenario import (
    LOCK_TTL,
    Faults,
    LeaseWarning,
    Policy,
    Scenario,
    ScriptedCrash,
    ScriptedOutage,
    Workload,
    validate,
)
from sim.wording import count
from sim.wording import times as times  # the notebooks' teaching.times

FAST_ENV = "LEASELAB_FAST"
HEADLESS_ENV = "LEASELAB_HEADLESS"
_TRUE = ("1", "true", "yes", "on")
_FALSE = ("", "0", "false", "no", "off")
# Processes that execute notebooks without a widget frontend (the kernel's parent).
HEADLESS_RUNNERS = ("nbconvert", "nbclient", "papermill", "pytest", "nbmake")
STRATEGIES = ("read_then_write", "conditional_update", "skip_locked", "select_for_update")


# ---- sizing: fast (CI) and full (publication) mode ------------------------------------------------

def _flag(name: str) -> bool | None:
    """An environment flag: True, False, or None when unset."""
    value = os.environ.get(name)
    if value is None:
        return None
    value = value.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ConfigError(f"${name}: expected 1 or 0 (true/false, yes/no, on/off), got {value!r}")


def fast_mode(override: bool | None = None) -> bool:
    """Fast mode (small horizons, few jobs and replications): `override` if given, else $LEASELAB_FAST."""
    if override is not None:
        return bool(override)
    return bool(_flag(FAST_ENV))


def size(full, fast, *, mode: bool | None = None):
    """`fast` in fast mode, else `full`. `mode` forces the mode (None: $LEASELAB_FAST)."""
    return fast if fast_mode(mode) else full


def sizes(mode: bool | None = None, **pairs) -> SimpleNamespace:
    """Several sizes at once: sizes(FAST, reps=(100, 8), jobs=(900, 150)).reps -> 100 or 8."""
    out = {}
    for name, pair in pairs.items():
        if not isinstance(pair, tuple) or len(pair) != 2:
            raise ConfigError(f"{name}: expected a (full, fast) pair, got {pair!r}")
        out[name] = size(*pair, mode=mode)
    return SimpleNamespace(**out)


def setup(fast: bool | None = None) -> bool:
    """Plotting and display defaults for a notebook; returns whether fast mode is on.

    Full mode draws at a higher resolution for sharing (make html); fast mode keeps CI light.
    """
    import matplotlib as mpl

    mode = fast_mode(fast)
    mpl.rcParams.update({
        "figure.dpi": 72 if mode else 110,
        "savefig.dpi": 110 if mode else 160,
        "axes.titlesize": 10,
        "axes.spines.top": False,
        "axes.spines.right": False,
    })
    pd.set_option("display.precision", 3)
    pd.set_option("display.max_columns", 30)
    pd.set_option("display.width", 160)
    return mode


def executor(fast: bool | None = None) -> str | None:
    """The `executor=` for sweeps: in-process ("serial") in fast mode, where runs are few and a
    process pool would cost more to start than it saves; None (all cores) in full mode."""
    return "serial" if fast_mode(fast) else None


def release_workers() -> None:
    """Stop the worker processes that full-mode sweeps started (they otherwise live until the
    kernel exits)."""
    from sim.sweep import shutdown_pools

    shutdown_pools()


def progress() -> bool | None:
    """The `progress=` for sweeps: automatic where a widget frontend shows bars, never headless."""
    return None if not headless() else False


# ---- prose computed from variables ----------------------------------------------------------------

def md(text: str):
    """Show `text` (Markdown, usually an f-string) as prose in a notebook; print it elsewhere."""
    from IPython import get_ipython
    from IPython.display import Markdown, display

    if get_ipython() is None:
        print(text)
        return None
    display(Markdown(text))
    return None


def claim(condition, text: str):
    """Show `text` as prose if `condition` holds, else fail loudly: a notebook's claims are checked
    every time it runs (CI included), so the narrative cannot drift from the numbers."""
    if not bool(condition):
        raise AssertionError(f"the notebook claims, but this run does not show: {text}")
    return md(text)


def seconds(x: float, digits: int = 3) -> str:
    """'12.3 s', '15 min', '4 h', 'never' (NaN or inf)."""
    if x is None or not np.isfinite(x):
        return "never"
    if abs(x) >= 7200:
        return f"{x / 3600:.{digits}g} h"
    if abs(x) >= 120:
        return f"{x / 60:.{digits}g} min"
    return f"{x:.{digits}g} s"


def percent(x: float, digits: int = 2) -> str:
    if x is None or not np.isfinite(x):
        return "n/a"
    if x == 0:
        return "0%"
    return f"{100 * x:.{digits}g}%"


# ---- scenarios the lessons share ------------------------------------------------------------------

def one_job(*, ttl: float = 15.0, heartbeat_interval: float = 5.0, watcher_interval: float = 5.0,
            heartbeat: bool = True, watcher: bool = True, lock: bool = False, crash_at: float | None = None,
            pause: tuple[float, float] | None = None, partition: tuple[float, float] | None = None,
            work: float = 40.0, psp_at: float = 0.5, workers: int = 2, poll_interval: float = 1.0,
            claim_takes_expired: bool = False, fencing: bool = True, abandon_on_lost_lease: bool = True,
            idempotency_key: bool = True, horizon: float | None = None, seed: int = 1,
            name: str | None = None) -> Scenario:
    """One payment job of `work` seconds and `workers` workers: the smallest scene of a lesson.

    crash_at: the job's owner crashes then and never comes back. pause / partition: (at, duration)
    for worker w0, which holds the job (workers poll from t = 0 in order, so w0 claims first).
    lock=True models a lock instead of a lease: a claim that never expires (TTL LOCK_TTL), no
    heartbeat, no watcher. Statement latency is a constant 2 ms; the PSP call 0.3 s.
    """
    if lock:
        ttl, heartbeat, watcher = LOCK_TTL, False, False
    faults = Faults(
        crashes=(ScriptedCrash(at=float(crash_at), job=1),) if crash_at is not None else (),
        restart_delay=Dist.constant(1e7),
        pauses=(ScriptedOutage(worker=0, at=float(pause[0]), duration=float(pause[1])),) if pause else (),
        partitions=(ScriptedOutage(worker=0, at=float(partition[0]), duration=float(partition[1])),) if partition else (),
        partition_mode="hang",
    )
    policy = Policy(workers=workers, poll_interval=poll_interval, lease_ttl=float(ttl), heartbeat=heartbeat,
                    heartbeat_interval=float(heartbeat_interval), watcher=watcher,
                    watcher_interval=float(watcher_interval), claim_takes_expired=claim_takes_expired,
                    fencing=fencing, dedup=True, idempotency_key=idempotency_key,
                    abandon_on_lost_lease=abandon_on_lost_lease, random_phase=False)
    workload = Workload(jobs=1, processing=Dist.constant(float(work)), psp_at=psp_at,
                        psp_call=Dist.constant(0.3), statement_latency=Dist.constant(0.002))
    if horizon is None:
        outage = (pause or partition or (0.0, 0.0))
        horizon = max(work + 2 * (0 if lock else ttl) + (0 if lock else watcher_interval) + 10.0,
                      (crash_at or 0.0) + 2 * work + 20.0, outage[0] + outage[1] + work + 20.0)
    label = name or ("lock" if lock else "lease")
    return validate(Scenario(name=label, workload=workload, policy=policy, faults=faults, horizon=float(horizon),
                             seed=seed))


def recovery_experiment(*, ttl: float = 30.0, heartbeat_interval: float = 10.0, poll_interval: float = 2.0,
                        watcher_interval: float = 30.0, watcher: bool = True, crash_at: float = 1000.0,
                        mean_arrival: float = 100.0, latency: float = 0.002,
                        longest_watcher_interval: float = 300.0) -> Scenario:
    """The controlled recovery experiment behind notebook 04's sweep (DESIGN.md "Theory").

    One very long job arrives at an exponentially distributed time (mean `mean_arrival`), is claimed
    by one of two workers, renewed by heartbeat, and its owner crashes at `crash_at` for good; the
    other worker is the one idle poller. The random arrival puts the crash at a (nearly) uniform
    phase of the heartbeat cycle: see phase_bias(). With watcher=False the claim itself takes the
    expired lease (claim_takes_expired), else only the watcher's requeue makes it claimable. The
    horizon leaves room for watcher intervals up to `longest_watcher_interval`, so that a sweep over
    policy.watcher_interval recovers every crash inside the run.
    """
    return Scenario(
        name="recovery-experiment",
        description="One long job, two workers, its owner crashes for good; the other worker recovers it.",
        workload=Workload(jobs=1, arrival="poisson", rate=1.0 / mean_arrival, processing=Dist.constant(1e7),
                          psp_call=Dist.constant(0.0), statement_latency=Dist.constant(latency)),
        policy=Policy(workers=2, poll_interval=poll_interval, lease_ttl=ttl, heartbeat_interval=heartbeat_interval,
                      watcher=watcher, watcher_interval=watcher_interval, claim_takes_expired=not watcher),
        faults=Faults(crashes=(ScriptedCrash(at=crash_at, job=1),), restart_delay=Dist.constant(1e7)),
        horizon=crash_at + ttl + (max(watcher_interval, longest_watcher_interval) if watcher else 0.0)
        + 2 * poll_interval + 10.0,
    )


def phase_bias(*, mean_arrival: float, heartbeat_interval: float, latency: float = 0.002) -> float:
    """How much recovery_experiment() shortens the mean recovery against the uniform-phase theory.

    The crash phase phi = time since the last renewal; with an exponential arrival its density is
    proportional to exp(phi / mean) on [0, h'), so E[phi] = h' / (1 - exp(-h'/mean)) - mean
    instead of h'/2, and the lease left at the crash is shorter by the difference.
    """
    cycle = heartbeat_interval + latency
    rate = 1.0 / mean_arrival
    return cycle / -math.expm1(-rate * cycle) - mean_arrival - cycle / 2


def followed_job(run, jobs: Iterable[int]) -> int:
    """Of `jobs` (ids, in order of preference), one worth following on a timeline: the first whose
    leases were held by more than one worker (the hand-over draws an arrow between two lanes),
    else the first."""
    jobs = [int(j) for j in jobs]
    if not jobs:
        raise ConfigError("followed_job: no job to follow")
    holders = run.leases.groupby("job")["worker"].nunique()
    return next((j for j in jobs if holders.get(j, 0) > 1), jobs[0])


def busy_window(run, pad: float = 4.0) -> tuple[float, float]:
    """(0, a little after the last lease, DB lease or outage ended): where a small run happens."""
    leases = run.leases
    ends = [0.0]
    if len(leases):
        ends += [float(np.nanmax(leases["end"])), float(np.nanmax(leases["released_at"].fillna(0.0)))]
        finite = leases["until"][leases["until"] < run.scenario.horizon]
        if len(finite):
            ends.append(float(finite.max()))
    events = run.events
    marks = events.loc[events["kind"].isin(["pause_end", "partition_end", "crash"]), "t"]
    if len(marks):
        ends.append(float(marks.max()))
    return 0.0, min(float(run.scenario.horizon), max(ends) + pad)


def stalling_queue(*, jobs: int = 600, workers: int = 6, pause_rate: float = 60.0, seed: int = 1) -> Scenario:
    """A payment queue whose workers stall: stop-the-world pauses (`pause_rate` per worker-hour,
    lognormal, median 1 s, p99 10 s) on jobs with a long tail (lognormal, median 4 s, p99 60 s), at
    about half load, heartbeat every 2 s when on. Each job gets one lease (max_attempts 1), so false
    expiries per lease are false expiries per job."""
    processing = Dist.lognormal(4.0, 60.0)
    rate = 0.5 * workers / processing.mean_value()
    return validate(Scenario(
        name="stalling-queue",
        description="Workers stall (GC pauses) now and then; how often does a lease expire under a live owner?",
        workload=Workload(jobs=jobs, arrival="poisson", rate=rate, processing=processing, psp_call=Dist.constant(0.0),
                          statement_latency=Dist.constant(0.002)),
        policy=Policy(workers=workers, poll_interval=1.0, lease_ttl=30.0, heartbeat_interval=2.0, watcher_interval=5.0,
                      claim_takes_expired=False, max_attempts=1),
        faults=Faults(pause_rate=pause_rate, pause_duration=Dist.lognormal(1.0, 10.0)),
        horizon=jobs / rate + 3 * processing.quantile(0.99), seed=seed))


ADVICE_AXES = {"x": "predicted_false_expiry", "y": "predicted_recovery_mean", "size": "predicted_db_load"}


def advice_frame(advice, *, watcher_interval: float | None = None, heartbeats: Iterable | None = None,
                 ttls: Iterable[float] | None = None, negligible: float | None = None) -> pd.DataFrame:
    """advice.candidates shaped like a sweep aggregate, for sim.plots.tradeoff.

    Keeps one watcher interval (the recommended one by default) and, if given, some heartbeat
    intervals (None: no heartbeat) and TTLs. The heartbeat column holds labels ("2 s", "none")
    so that points read "TTL 10 s, hb none"; the predictions become <metric>_mean columns named
    for what they are (ADVICE_AXES: predicted_false_expiry, the probability per job;
    predicted_recovery_mean; predicted_db_load, heartbeat + watcher statements/s), so that
    `tradeoff(frame, **ADVICE_AXES)` labels its axes with them, not with simulated rates.
    Predicted false expiries below `negligible` (default: a tenth of the advice's target) count
    as 0, so that settings differing only by one in a billion do not all look Pareto-optimal.
    """
    table = advice.candidates
    watcher = advice.watcher_interval if watcher_interval is None else float(watcher_interval)
    rows = table[table["watcher_interval"] == watcher].copy()
    if rows.empty:
        raise ConfigError(f"watcher_interval: {watcher:g} s is not among the candidates")
    if heartbeats is not None:
        wanted = [h for h in heartbeats]
        keep = rows["heartbeat_interval"].isin([float(h) for h in wanted if h is not None])
        if any(h is None for h in wanted):
            keep |= rows["heartbeat_interval"].isna()
        rows = rows[keep]
    if ttls is not None:
        rows = rows[rows["ttl"].isin([float(t) for t in ttls])]
    labels = ["none" if pd.isna(h) else f"{h:g} s" for h in rows["heartbeat_interval"]]
    floor = advice.target_false_expiry / 10 if negligible is None else float(negligible)
    risk = rows["predicted_false_expiry"].to_numpy(float)
    return pd.DataFrame({
        "policy.lease_ttl": rows["ttl"].to_numpy(float),
        "policy.heartbeat_interval": labels,
        "predicted_false_expiry_mean": np.where(risk < floor, 0.0, risk),
        "predicted_recovery_mean_mean": rows["predicted_recovery_mean"].to_numpy(float),
        "predicted_db_load_mean": rows["db_load"].to_numpy(float),
        "feasible": rows["feasible"].to_numpy(bool),
    }).reset_index(drop=True)


# ---- figures --------------------------------------------------------------------------------------

def duration_summary(values) -> pd.Series:
    """Count, median, p90, p99, p99.9 and max of observed durations (seconds)."""
    values = np.asarray(values, dtype=float)
    q = np.quantile(values, [0.5, 0.9, 0.99, 0.999])
    return pd.Series({"jobs": len(values), "median": q[0], "p90": q[1], "p99": q[2], "p99.9": q[3],
                      "max": float(values.max())})


def plot_durations(values, *, ttl: float | None = None, heartbeat_interval: float | None = None, ax=None):
    """Histogram of durations on a log axis, with the median, p99, p99.9 and max marked; optionally
    the TTL and heartbeat interval of a recommendation, to see what each has to cover."""
    from sim.plots import INK, PALETTE

    if ax is None:
        import matplotlib.pyplot as plt

        _, ax = plt.subplots(figsize=(10, 4), layout="constrained")
    values = np.asarray(values, dtype=float)
    positive = values[values > 0]
    bins = np.geomspace(positive.min(), positive.max(), 60)
    ax.hist(positive, bins=bins, color=PALETTE[0], alpha=0.75, edgecolor="white", lw=0.4, gid="histogram")
    ax.set_xscale("log")
    summary = duration_summary(values)
    for k, name in enumerate(("median", "p99", "p99.9", "max")):
        ax.axvline(summary[name], color=INK, ls=(0, (1 + k, 2)), lw=1.0)
        right = k < 2  # the last labels go left of their line, inside the axes
        ax.annotate(f"{name} {summary[name]:.3g} s", (summary[name], 1.0), xycoords=("data", "axes fraction"),
                    xytext=(3 if right else -3, -4 - 11 * k), textcoords="offset points", fontsize=8, color=INK,
                    va="top", ha="left" if right else "right")
    for value, label, colour in ((ttl, "TTL", PALETTE[5]), (heartbeat_interval, "heartbeat", PALETTE[2])):
        if value is not None:
            ax.axvline(value, color=colour, lw=2.0)
            ax.annotate(f"{label} {value:g} s", (value, 0.5), xycoords=("data", "axes fraction"), xytext=(4, 0),
                        textcoords="offset points", fontsize=8, color=colour, rotation=90, va="center")
    ax.set_xlabel("processing time (s, log scale)")
    ax.set_ylabel("jobs")
    ax.set_title(f"Observed processing times: {int(summary['jobs'])} jobs", loc="left", fontsize=10)
    ax.grid(color="#e6e6e6", lw=0.6)
    return ax


def lease_clock(run, job: int = 1, ax=None):
    """Seconds left on each lease of `job` over time: a heartbeat resets it, zero means expired.

    One sawtooth per lease (colour and line style by worker). A crash (x) stops the renewals but
    not the clock: the lease runs down to zero in the database, where the job becomes claimable
    (o). A lock never runs down. Returns the Axes.
    """
    from matplotlib.lines import Line2D

    from sim.plots import INK, LINESTYLES, PALETTE

    if ax is None:
        import matplotlib.pyplot as plt

        _, ax = plt.subplots(figsize=(11, 3.4), layout="constrained")
    leases = run.leases[run.leases["job"] == job]
    if leases.empty:
        raise ConfigError(f"job {job}: no lease in this run")
    if run.scenario.policy.lease_ttl >= LOCK_TTL:
        raise ConfigError("lease_clock: this run's claims never expire (a lock): there is no clock to draw")
    events = run.events
    mine = events[(events["job"] == job) & events["kind"].isin(["claim", "heartbeat"])]
    crashes = events[(events["job"] == job) & (events["kind"] == "crash")]
    horizon = float(run.scenario.horizon)
    ttl = run.scenario.policy.lease_ttl
    workers = sorted(leases["worker"].unique(), key=lambda w: int(str(w).lstrip("w") or 0))
    handles, labels = [], []
    top = 0.0
    for lease in leases.itertuples():
        renewals = mine[(mine["worker"] == lease.worker) & (mine["attempt"] == lease.attempt)
                        & (mine["t"] >= lease.start)]
        renewed_at = renewals["t"].to_numpy(float)
        untils = renewals["detail"].to_numpy(float)
        last_until = float(untils[-1])
        stop = min(last_until, horizon)
        if lease.outcome == "completed" and lease.released_at < last_until:
            stop = float(lease.released_at)
        k = workers.index(lease.worker)
        colour, style = PALETTE[k % len(PALETTE)], LINESTYLES[k % len(LINESTYLES)]
        xs, ys = [], []
        for i, (t, until) in enumerate(zip(renewed_at, untils, strict=True)):
            end = min(renewed_at[i + 1], stop) if i + 1 < len(renewed_at) else stop
            if t > stop:
                break
            xs += [t, end]
            ys += [until - t, until - end]
        ax.plot(xs, ys, color=colour, ls=style, lw=1.8, zorder=3, gid="lease-left")
        top = max(top, max(ys))
        if lease.worker not in labels:
            handles.append(Line2D([], [], color=colour, ls=style, lw=1.8))
            labels.append(f"{lease.worker}'s lease")
        if stop == last_until and stop < horizon:
            ax.plot([stop], [0], marker="o", ms=8, mfc="white", mec=INK, mew=1.6, zorder=5, gid="expired")
    for crash in crashes.itertuples():
        ax.axvline(crash.t, color=INK, lw=0.8, ls=":", zorder=1)
        ax.plot([crash.t], [0], marker="x", ms=10, mew=2.2, color=INK, zorder=5, gid="crash")
    if len(crashes):
        handles.append(Line2D([], [], ls="none", marker="x", ms=9, mew=2.2, color=INK))
        labels.append("owner crashes")
    if top > 0:
        ax.axhline(ttl, color="#999999", lw=0.9, ls="--", zorder=1)
        ax.annotate("TTL: a fresh lease", (0, ttl), xytext=(4, 3), textcoords="offset points", fontsize=8,
                    color="#555555")
    handles.append(Line2D([], [], ls="none", marker="o", ms=8, mfc="white", mec=INK, mew=1.6))
    labels.append("lease runs out: the job is claimable again")
    ax.axhline(0, color=INK, lw=1.0, zorder=2)
    ax.set_xlim(*busy_window(run))
    ax.set_ylim(-0.06 * max(top, 1.0), 1.12 * max(top, 1.0))
    ax.set_xlabel("simulated time (s)")
    ax.set_ylabel("seconds left on the lease")
    ax.set_title(f"{run.scenario.name}: time left on each lease of job {job} "
                 "(a heartbeat resets it; at zero the job is claimable again)", loc="left", fontsize=10)
    ax.grid(color="#e6e6e6", lw=0.6)
    ax.legend(handles, labels, loc="upper left", bbox_to_anchor=(1.005, 1.0), fontsize=8, frameon=False,
              borderaxespad=0.0)
    return ax


def false_expiry_table(runs: pd.DataFrame, keys=("policy.heartbeat", "policy.lease_ttl"),
                       confidence: float = 0.95) -> pd.DataFrame:
    """Per key combination of a sweep's runs: false expiries and leases pooled over replications,
    their ratio and its Wilson interval (well behaved when no lease expired)."""
    from sim.sweep import wilson_interval

    keys = list(keys)
    pooled = runs.groupby(keys, sort=True)[["false_expiries", "leases"]].sum().reset_index()
    bounds = [wilson_interval(fe, n, confidence) for fe, n in zip(pooled["false_expiries"], pooled["leases"], strict=True)]
    pooled["rate"] = pooled["false_expiries"] / pooled["leases"].where(pooled["leases"] > 0)
    pooled["low"] = [b[0] for b in bounds]
    pooled["high"] = [b[1] for b in bounds]
    return pooled


def plot_false_expiry(table: pd.DataFrame, scenario: Scenario, ax=None):
    """False-expiry rate vs lease TTL, without and with heartbeats (false_expiry_table of a sweep
    over policy.lease_ttl x policy.heartbeat), beside sim.analytic.false_expiry_probability.

    Log-log axes; a setting with no false expiry is drawn as a down-pointing marker at the upper end
    of its interval. Dotted lines mark the p99 of the job durations and of the pauses.
    """
    from sim import analytic
    from sim.plots import INK, PALETTE

    if ax is None:
        import matplotlib.pyplot as plt

        _, ax = plt.subplots(figsize=(9, 5), layout="constrained")
    w, p, f = scenario.workload, scenario.policy, scenario.faults
    ttls = np.geomspace(table["policy.lease_ttl"].min(), table["policy.lease_ttl"].max(), 60)
    for k, (beat, group) in enumerate(table.groupby("policy.heartbeat", sort=True)):
        colour = PALETTE[k]
        label = f"heartbeat every {p.heartbeat_interval:g} s" if beat else "no heartbeat"
        seen = group[group["false_expiries"] > 0]
        ax.errorbar(seen["policy.lease_ttl"], seen["rate"], yerr=[seen["rate"] - seen["low"], seen["high"] - seen["rate"]],
                    ls="none", marker="o", ms=6, mec=INK, mew=0.6, color=colour, capsize=3,
                    label=f"simulated, {label} (95% interval)", gid="simulated")
        unseen = group[group["false_expiries"] == 0]
        if len(unseen):
            ax.plot(unseen["policy.lease_ttl"], unseen["high"], ls="none", marker="v", ms=7, mec=INK, mew=0.6,
                    color=colour, label=f"none seen, {label}: upper bound", gid="upper-bound")
        theory = [analytic.false_expiry_probability(ttl=t, heartbeat_interval=p.heartbeat_interval if beat else None,
                                                    job_duration=w.processing, pause_rate=f.pause_rate,
                                                    pause_duration=f.pause_duration,
                                                    latency=w.statement_latency.mean_value()) for t in ttls]
        ax.plot(ttls, theory, color=colour, ls="--", lw=1.4, label=f"theory, {label}", gid="theory")
    for value, text in ((w.processing.quantile(0.99), "p99 job duration"), (f.pause_duration.quantile(0.99), "p99 pause")):
        ax.axvline(value, color="#777777", ls=":", lw=1.0)
        ax.annotate(text, (value, 0.5), xycoords=("data", "axes fraction"), xytext=(3, 0), textcoords="offset points",
                    fontsize=8, color="#555555", rotation=90, va="center")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("lease TTL (s)")
    ax.set_ylabel("false-expiry rate (share of leases expired\nunder a live owner, log scale)")
    ax.set_title("False expiry vs TTL: without a heartbeat the TTL must outlast the job, with one only the longest stall",
                 loc="left", fontsize=10)
    ax.grid(color="#e6e6e6", lw=0.6, which="both")
    ax.legend(fontsize=8, frameon=False, loc="lower left")
    return ax


# ---- interactive explorers ------------------------------------------------------------------------

def _parent_cmdline() -> str:
    """The command line of the process that launched this kernel (Linux), or ''."""
    pid = os.environ.get("JPY_PARENT_PID")
    if not pid:
        return ""
    try:
        return Path(f"/proc/{int(pid)}/cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace")
    except (OSError, ValueError):
        return ""


def headless(override: bool | None = None) -> bool:
    """True when no widget frontend can show sliders: $LEASELAB_HEADLESS, no IPython kernel, or a
    kernel started by a batch runner (nbconvert, nbclient, papermill, pytest). `override` wins."""
    if override is not None:
        return bool(override)
    flag = _flag(HEADLESS_ENV)
    if flag is not None:
        return flag
    try:
        from IPython import get_ipython
    except ImportError:
        return True
    shell = get_ipython()
    if shell is None or not hasattr(shell, "kernel"):
        return True
    parent = _parent_cmdline().lower()
    return any(runner in parent for runner in HEADLESS_RUNNERS)


def widgets_available(headless_override: bool | None = None) -> bool:
    """Sliders can be shown: a widget frontend is (probably) attached and ipywidgets is installed."""
    if headless(headless_override):
        return False
    try:
        import ipywidgets  # noqa: F401
    except ImportError:
        return False
    return True


@dataclass
class Control:
    """One slider: a scenario setting the explorer varies."""

    name: str
    low: float
    high: float
    step: float
    value: float
    label: str = ""

    def __post_init__(self):
        if not (self.low <= self.value <= self.high) or self.step <= 0:
            raise ConfigError(f"{self.name}: need low <= value <= high and step > 0, got "
                              f"{self.low}, {self.value}, {self.high}, step {self.step}")


@dataclass
class Explorer:
    """Re-runs `make_run(**values)` and redraws its figure (see explore())."""

    make_run: Callable[..., object]
    controls: list[Control]
    draw: Callable | None = None
    figsize: tuple[float, float] = (12.0, 3.6)
    values: dict = field(default_factory=dict)
    seconds: float = float("nan")  # wall time of the last re-run and redraw
    last_run: object = None
    handle: object = None
    widgets: object = None

    def __post_init__(self):
        self.values = {c.name: c.value for c in self.controls} | self.values

    def figure(self, **changes):
        """Run with the current values (updated by `changes`) and return a new Figure."""
        from matplotlib.figure import Figure

        start = time.perf_counter()
        self.values.update(changes)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", LeaseWarning)
            run = self.make_run(**self.values)
        self.last_run = run
        fig = Figure(figsize=self.figsize, layout="constrained")
        ax = fig.add_subplot()
        (self.draw or _draw_timeline)(run, ax)
        notes = [str(w.message) for w in caught if issubclass(w.category, LeaseWarning)]
        if notes:
            fig.text(0.01, 0.01, "warning: " + "; ".join(notes), fontsize=8, color="#B00000", ha="left", va="bottom")
        fig.canvas.draw()  # render now, so `seconds` covers the drawing too
        self.seconds = time.perf_counter() - start
        return fig

    def update(self, **changes) -> None:
        """Re-run and replace the shown figure (what a slider does)."""
        fig = self.figure(**changes)
        if self.handle is not None:
            self.handle.update(fig)

    def show(self, headless_override: bool | None = None) -> Explorer:
        """Show the figure; with a widget frontend, sliders above it re-run and redraw on release."""
        from IPython.display import display

        interactive = widgets_available(headless_override)
        if interactive:
            import ipywidgets as w

            sliders = []
            for c in self.controls:
                slider = w.FloatSlider(value=c.value, min=c.low, max=c.high, step=c.step, description=c.label or c.name,
                                       continuous_update=False, readout_format=".3g",
                                       style={"description_width": "initial"}, layout=w.Layout(width="420px"))
                slider.observe(lambda change, name=c.name: self.update(**{name: change["new"]}), names="value")
                sliders.append(slider)
            self.widgets = w.VBox(sliders)
            display(self.widgets)
        self.handle = display(self.figure(), display_id=True)
        return self


def _draw_timeline(run, ax) -> None:
    from sim.plots import lease_timeline

    lease_timeline(run, ax, window=busy_window(run))


def explore(make_run: Callable[..., object], controls: Iterable[Control | tuple], *, draw: Callable | None = None,
            figsize: tuple[float, float] = (12.0, 3.6), headless: bool | None = None) -> Explorer:
    """Sliders that re-run a small scenario and redraw its figure (by default its lease timeline).

    controls: Control objects or tuples (name, low, high, step, value[, label]); make_run receives
    the values as keyword arguments. Headless (no widget frontend) it runs once with the values
    given and shows the figure as a static image.
    """
    parsed = [c if isinstance(c, Control) else Control(*c) for c in controls]
    return Explorer(make_run, parsed, draw=draw, figsize=figsize).show(headless)


# ---- the database by hand -------------------------------------------------------------------------

class Script:
    """Drive a Backend by hand, statement by statement, and keep a transcript.

        s = Script()                       # a fresh simulated PostgreSQL (or Script(PostgresBackend()))
        s.connect("A", "B")
        s.at(1.0).sql("A", "insert_job", id=1, event_id="evt-1", payload="{}")
        s.sql("A", "claim_conditional", id=1, owner="A", ttl=30)
        s.transcript                       # step, t, client, statement, result

    Time parameters: `now` is the script's clock (at()); `ttl=` fills lease_until = now + ttl.
    A statement that waits on another client's lock returns Blocked; commit or roll back the
    holder, then resume() the waiter.
    """

    def __init__(self, db: Backend | None = None, clock: float = 0.0):
        if db is None:
            from sim.db.memory import MemoryBackend

            db = MemoryBackend()
        self.db = db
        self.now = float(clock)
        self.rows: list[dict] = []
        self._connected: set[str] = set()

    def at(self, t: float) -> Script:
        self.now = float(t)
        return self

    def connect(self, *clients: str) -> Script:
        for client in clients:
            self.db.connect(client)
            self._connected.add(client)
        return self

    def _record(self, client: str, statement: str, result) -> None:
        if isinstance(result, Blocked):
            text = f"waits for {result.holder}'s transaction"
        elif isinstance(result, list):
            text = count(len(result), "row") + (f": {_short(result)}" if result else "")
        else:
            text = str(result)
        self.rows.append({"step": len(self.rows) + 1, "t": self.now, "client": client, "statement": statement,
                          "result": text})

    def sql(self, client: str, query: str, *, ttl: float | None = None, **params):
        """Run the named query (sql/queries.sql) for `client`; returns rows or Blocked."""
        q = get_query(query)
        if "now" in q.param_names:
            params.setdefault("now", self.now)
        if "lease_until" in q.param_names and ttl is not None:
            params["lease_until"] = self.now + float(ttl)
        for name, value in QUERY_DEFAULTS.items():  # Policy's defaults: 25 attempts, no retry backoff
            if name in q.param_names:
                params.setdefault(name, value)
        if client not in self._connected:
            self.connect(client)
        result = self.db.execute(client, query, params)
        self._record(client, query, result)
        return result

    def begin(self, client: str) -> None:
        if client not in self._connected:
            self.connect(client)
        self.db.begin(client)
        self._record(client, "BEGIN", "ok")

    def commit(self, client: str) -> None:
        self.db.commit(client)
        self._record(client, "COMMIT", "ok")

    def rollback(self, client: str) -> None:
        self.db.rollback(client)
        self._record(client, "ROLLBACK", "ok")

    def crash(self, client: str) -> None:
        """The client dies: its transaction rolls back, its locks go; it reconnects on next use."""
        self.db.crash(client)
        self._connected.discard(client)
        self._record(client, "(crash)", "connection gone: open transaction rolled back")

    def resume(self, client: str):
        result = self.db.resume(client)
        self._record(client, "(resumes)", result)
        return result

    def table(self, name: str) -> pd.DataFrame:
        """The committed contents of jobs, ledger or processed_events."""
        from sim.results import JOB_TABLE_COLUMNS

        columns = {"jobs": JOB_TABLE_COLUMNS,
                   "ledger": ["entry_id", "job_id", "event_id", "amount_cents", "worker", "attempt", "applied_at"],
                   "processed_events": ["event_id", "payload_hash", "processed_at"]}
        if name not in columns:
            raise ConfigError(f"table: {name!r} is not one of {', '.join(columns)}")
        if "_inspector" not in self._connected:
            self.connect("_inspector")
        return pd.DataFrame(self.db.execute("_inspector", f"dump_{name}", {}), columns=columns[name])

    @property
    def transcript(self) -> pd.DataFrame:
        return pd.DataFrame(self.rows, columns=["step", "t", "client", "statement", "result"]).set_index("step")

    def close(self) -> None:
        self.db.close()


def _short(rows: list, limit: int = 3) -> str:
    shown = ", ".join(str(tuple(round(v, 3) if isinstance(v, float) else v for v in r)) for r in rows[:limit])
    return shown + (", ..." if len(rows) > limit else "")


def payload_hash(payload: str) -> str:
    """The hash stored with a dedup marker (as the model computes it)."""
    import hashlib

    return hashlib.sha256(payload.encode()).hexdigest()[:16]


class Delivery:
    """One delivery of an event, handled with seed 2's transaction on a Script's client:

        BEGIN;
        INSERT INTO processed_events ... ON CONFLICT DO NOTHING RETURNING event_id;
        -- a row back: apply the effect (a ledger row); none: a duplicate (or another payload)
        COMMIT;

    start() runs BEGIN and the marker insert ("claimed", "duplicate", "rejected" or "waiting" when
    another delivery of the same event holds the uncommitted marker); finish() resumes a waiting
    insert, applies the effect when claimed and commits. crash() kills the client mid-way.
    """

    def __init__(self, script: Script, client: str, event_id: str, *, amount_cents: int = 1000,
                 payload: str | None = None, job_id: int = 1, attempt: int = 1):
        self.script, self.client, self.event_id = script, client, event_id
        self.amount_cents, self.job_id, self.attempt = amount_cents, job_id, attempt
        self.payload = payload if payload is not None else json.dumps({"event_id": event_id, "amount_cents": amount_cents})
        self.state = "new"

    def start(self) -> str:
        self.script.begin(self.client)
        rows = self.script.sql(self.client, "insert_dedup_marker", event_id=self.event_id,
                               payload_hash=payload_hash(self.payload))
        return self._after_marker(rows)

    def _after_marker(self, rows) -> str:
        if isinstance(rows, Blocked):
            self.state = "waiting"
        elif rows:
            self.state = "claimed"
        else:
            stored = self.script.sql(self.client, "read_dedup_marker", event_id=self.event_id)
            self.state = "rejected" if stored and stored[0][1] != payload_hash(self.payload) else "duplicate"
        return self.state

    def finish(self) -> str:
        """Resume if waiting, apply the effect if claimed, commit (roll back a rejected payload)."""
        if self.state == "waiting":
            self._after_marker(self.script.resume(self.client))
            if self.state == "waiting":
                return self.state
        if self.state == "claimed":
            self.script.sql(self.client, "insert_ledger_entry", job_id=self.job_id, event_id=self.event_id,
                            amount_cents=self.amount_cents, worker=self.client, attempt=self.attempt)
            self.script.commit(self.client)
            self.state = "applied"
        elif self.state == "duplicate":
            self.script.commit(self.client)
            self.state = "skipped"
        elif self.state == "rejected":
            self.script.rollback(self.client)
            self.state = "rejected"
        else:
            raise ConfigError(f"delivery {self.event_id} by {self.client}: cannot finish from state {self.state!r}")
        return self.state

    def crash(self) -> str:
        self.script.crash(self.client)
        self.state = "crashed"
        return self.state

    def run(self) -> str:
        self.start()
        return self.finish()


def deliver(script: Script, client: str, event_id: str, **kwargs) -> str:
    """Deliver an event once, start to finish: 'applied', 'skipped' or 'rejected'."""
    return Delivery(script, client, event_id, **kwargs).run()


def ledger_counts(script: Script) -> pd.Series:
    """Ledger rows per event id (the stored effect)."""
    ledger = script.table("ledger")
    return ledger.groupby("event_id").size().rename("ledger_rows")


def retention_experiment(retention: float, *, window: float = 60.0, events: int = 200, spacing: float = 1.0,
                         purge_every: float = 5.0, seed: int = 0, db: Backend | None = None) -> pd.DataFrame:
    """Each event is delivered, then delivered again after a delay drawn uniformly up to `window`
    (the redelivery window); a purge job deletes dedup markers older than `retention` every
    `purge_every` seconds. One row per event: delays, whether its marker was gone when the
    redelivery came, and its ledger rows (2 = the duplicate got through).
    """
    if retention < 0 or window <= 0 or purge_every <= 0 or events < 1:
        raise ConfigError("retention_experiment: need retention >= 0, window > 0, purge_every > 0, events >= 1")
    rng = np.random.default_rng(seed)
    first = np.arange(1, events + 1) * spacing
    delay = rng.uniform(0.0, window, events)
    plan = [(t, 0, i) for i, t in enumerate(first)] + [(t + d, 1, i) for i, (t, d) in enumerate(zip(first, delay, strict=True))]
    horizon = max(t for t, _, _ in plan)
    plan += [(k * purge_every, -1, -1) for k in range(1, int(horizon // purge_every) + 1)]  # purges go first at a tie
    plan.sort()
    script = Script(db)
    script.connect("consumer", "purger")
    for t, kind, i in plan:
        script.at(t)
        if kind < 0:
            script.sql("purger", "purge_dedup_markers", before=max(0.0, t - retention))
        else:
            deliver(script, "consumer", f"evt-{i + 1}", job_id=i + 1, attempt=kind + 1)
    counts = ledger_counts(script)
    script.close()
    frame = pd.DataFrame({"event_id": [f"evt-{i + 1}" for i in range(events)], "delivered_at": first,
                          "redelivered_at": first + delay, "delay": delay})
    frame["ledger_rows"] = frame["event_id"].map(counts).fillna(0).astype(int)
    frame["duplicate"] = frame["ledger_rows"] > 1
    return frame


def retention_curve(retentions: Iterable[float], **kwargs) -> pd.DataFrame:
    """retention_experiment() for each retention: share of events whose duplicate got through."""
    rows = []
    for r in retentions:
        frame = retention_experiment(float(r), **kwargs)
        rows.append({"retention": float(r), "events": len(frame), "duplicates": int(frame["duplicate"].sum()),
                     "duplicate_share": float(frame["duplicate"].mean())})
    return pd.DataFrame(rows)


def plot_retention(curve: pd.DataFrame, window: float, ax=None):
    """Duplicates that got through vs dedup retention, with the redelivery window marked."""
    from matplotlib.ticker import PercentFormatter

    from sim.plots import INK, PALETTE

    if ax is None:
        import matplotlib.pyplot as plt

        _, ax = plt.subplots(figsize=(8, 4), layout="constrained")
    ax.plot(curve["retention"], 100 * curve["duplicate_share"], color=PALETTE[0], marker="o", mec=INK, mew=0.6,
            lw=1.6, gid="duplicates")
    ax.axvline(window, color=INK, ls="--", lw=1.2)
    ax.annotate("redelivery window", (window, ax.get_ylim()[1] * 0.9), xytext=(5, 0), textcoords="offset points",
                fontsize=8, color=INK)
    ax.yaxis.set_major_formatter(PercentFormatter(100, decimals=None))
    ax.set_xlabel("dedup marker retention (s)")
    ax.set_ylabel("redeliveries applied again")
    ax.set_ylim(bottom=0)
    ax.set_title("Dedup state kept shorter than the redelivery window lets duplicates through",
                 loc="left", fontsize=10)
    ax.grid(color="#e6e6e6", lw=0.6)
    return ax


# ---- claims under contention (notebook 02) --------------------------------------------------------

def contention(run) -> dict:
    """How a run's claims fared: double claims, lost claims (no row back), lock waits, drain time."""
    events = run.events
    waits = events.loc[events["kind"] == "lock_wait", "detail"]
    wait_seconds = waits.astype(str).str.rsplit(":", n=1).str[-1].astype(float) if len(waits) else pd.Series(dtype=float)
    jobs = run.jobs
    done = jobs["completed_at"]
    p = run.scenario.policy
    claims = sum(v for k, v in run.statement_counts.items() if k.startswith("claim_") or k == "lock_next_candidate")
    return {
        "claim": p.claim, "workers": p.workers, "gap": p.select_to_update_gap, "seed": run.scenario.seed,
        "jobs": len(jobs), "leases": int(run.summary["leases"]), "double_claims": int(run.summary["double_claims"]),
        "lost_claims": int((events["kind"] == "claim_lost").sum()), "claim_statements": int(claims),
        "lock_waits": len(waits), "lock_wait_seconds": float(wait_seconds.sum()),
        "drain_time": float(done.max()) if done.notna().all() and len(done) else float("nan"),
    }


def claim_contention(strategies: Iterable[str] = STRATEGIES, workers: Iterable[int] = (4, 8, 16, 32), *,
                     gap: float = 0.05, jobs: int = 400, mean_work: float = 0.5, seeds: Iterable[int] = (1,),
                     scenario: str | Scenario = "read-then-write-race") -> pd.DataFrame:
    """contention() of the read-then-write-race batch for each claim strategy, worker count and seed.

    gap: the application's time between reading a candidate and writing the claim; with the
    blocking SELECT ... FOR UPDATE it is spent holding the row lock, which is what makes a convoy.
    """
    import sim

    rows = []
    for strategy in strategies:
        for n in workers:
            for seed in seeds:
                run = sim.run(scenario, seed=seed, **{
                    "policy.claim": strategy, "policy.workers": int(n), "policy.select_to_update_gap": float(gap),
                    "workload.jobs": int(jobs), "workload.processing": {"kind": "exponential", "mean": float(mean_work)},
                    "expect": []})
                rows.append(contention(run))
    return pd.DataFrame(rows)


def plot_contention(frame: pd.DataFrame, axes=None):
    """Three panels vs workers, one line per claim strategy: time to drain the batch, seconds spent
    waiting on row locks (the FOR UPDATE convoy), claims that lost the race (no row back)."""
    from sim.plots import INK, LINESTYLES, MARKERS, PALETTE

    if axes is None:
        import matplotlib.pyplot as plt

        _, axes = plt.subplots(1, 3, figsize=(14, 4), layout="constrained")
    means = frame.groupby(["claim", "workers"], sort=True)[["drain_time", "lock_wait_seconds", "lost_claims"]].mean()
    panels = (("drain_time", "time to drain the batch (s)"), ("lock_wait_seconds", "worker-seconds waiting on row locks"),
              ("lost_claims", "claims that lost the race (no row)"))
    order = [s for s in STRATEGIES if s in means.index.get_level_values(0)]
    for ax, (metric, label) in zip(axes, panels, strict=True):
        for k, strategy in enumerate(order):
            values = means.loc[strategy, metric]
            ax.plot(values.index, values.to_numpy(), color=PALETTE[k], marker=MARKERS[k], ls=LINESTYLES[k], lw=1.6,
                    mec=INK, mew=0.6, label=strategy, gid="line")
        ax.set_xlabel("workers")
        ax.set_ylabel(label)
        ax.set_xscale("log", base=2)
        ax.set_xticks(sorted(frame["workers"].unique()), [str(w) for w in sorted(frame["workers"].unique())])
        ax.set_ylim(bottom=0)
        ax.grid(color="#e6e6e6", lw=0.6)
    axes[0].legend(title="claim strategy", fontsize=8, title_fontsize=8, frameon=False)
    seeds = frame.groupby(["claim", "workers"]).size().max()
    axes[0].figure.suptitle(f"Claims under contention: {int(frame['jobs'].iloc[0])} jobs at once, "
                            f"select-to-update gap {1000 * frame['gap'].iloc[0]:g} ms; mean of {seeds} run"
                            f"{'s' if seeds > 1 else ''} per point", x=0.01, ha="left", fontsize=10)
    return axes


# ---- PostgreSQL -----------------------------------------------------------------------------------

def sql_frame(db, text: str, params: Mapping | None = None) -> pd.DataFrame:
    """Run SQL text on a PostgresBackend's schema (its own connection) and return the rows.

    Time parameters are simulated seconds: pass them through sim.db.base.to_timestamp. Times in
    the result come back as timestamptz; seconds() turns them into simulated seconds.
    """
    if getattr(db, "name", None) != "postgres":
        raise ConfigError("sql_frame: needs a PostgresBackend (sim.make_backend('postgres'))")
    from psycopg import sql as pgsql

    from sim.db.server import open_connection

    with open_connection(db.dsn, autocommit=True, application_name="leaselab:notebook") as conn:
        conn.execute(pgsql.SQL("SET search_path TO {}").format(pgsql.Identifier(db.schema)))
        cur = conn.execute(text, params)
        if cur.description is None:
            return pd.DataFrame()
        return pd.DataFrame(cur.fetchall(), columns=[d.name for d in cur.description])


def sim_seconds(values) -> pd.Series:
    """timestamptz values from PostgreSQL -> simulated seconds (NaN for NULL)."""
    from sim.db.base import from_timestamp

    return pd.Series([np.nan if v is None or pd.isna(v) else from_timestamp(v) for v in values], dtype=float)


def compare_logs(a, b, *, tolerance: float = 1e-6) -> pd.DataFrame:
    """Two runs of one scenario (e.g. memory vs postgres), record by record and metric by metric.

    Returns one row per summary metric (a, b, equal) plus a first row 'event log' saying whether
    the records agree (same kinds, workers, jobs, attempts; times within `tolerance`).
    """
    ea, eb = a.events, b.events
    same = len(ea) == len(eb)
    if same:
        for column in ("kind", "worker", "job", "attempt"):
            if not ea[column].astype(str).reset_index(drop=True).equals(eb[column].astype(str).reset_index(drop=True)):
                same = False
                break
        if same:
            same = bool(np.allclose(ea["t"].to_numpy(float), eb["t"].to_numpy(float), atol=tolerance, rtol=0))
    rows = [{"metric": "event log (records)", "a": len(ea), "b": len(eb), "equal": same}]
    for metric in a.summary.index:
        x, y = a.summary[metric], b.summary.get(metric, np.nan)
        try:
            equal = bool(np.isclose(float(x), float(y), atol=tolerance, rtol=1e-9, equal_nan=True))
        except (TypeError, ValueError):
            equal = x == y
        rows.append({"metric": metric, "a": x, "b": y, "equal": equal})
    return pd.DataFrame(rows).rename(columns={"a": a.backend, "b": b.backend if b.backend != a.backend else "b"})


# ---- exercises ------------------------------------------------------------------------------------

@dataclass
class Verdict:
    """The answer to a "try it" exercise: right or not, and why. Shows as Markdown in a notebook."""

    ok: bool | None  # None: not answered yet
    message: str

    def __bool__(self) -> bool:
        return bool(self.ok)

    def _repr_markdown_(self) -> str:
        mark = {True: "**Right.**", False: "**Not quite.**", None: "**Not answered yet.**"}[self.ok]
        return f"{mark} {self.message}"

    def __repr__(self) -> str:
        mark = {True: "Right.", False: "Not quite.", None: "Not answered yet."}[self.ok]
        return f"{mark} {self.message}"


def _unanswered(hint: str) -> Verdict:
    return Verdict(None, f"Replace `None` with your answer and run the cell again. Hint: {hint}")


def _number(answer) -> float | None:
    try:
        value = float(answer)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) or math.isinf(value) else None


def check_lease_end(answer, run) -> Verdict:
    """01: when does the crashed owner's lease run out in the database? (within half a second)"""
    hint = "the last renewal before the crash set lease_until; the crash does not change it."
    if answer is None:
        return _unanswered(hint)
    crashed = run.leases[run.leases["end_reason"] == "crashed"]
    if crashed.empty:
        raise ConfigError("check_lease_end: this run has no crashed lease")
    lease = crashed.iloc[0]
    truth = float(lease["until"])
    renewed = run.events[(run.events["worker"] == lease["worker"]) & (run.events["job"] == lease["job"])
                         & run.events["kind"].isin(["claim", "heartbeat"])]
    last = float(renewed["t"].max())
    value = _number(answer)
    if value is not None and abs(value - truth) <= 0.5:
        return Verdict(True, f"The lease was last renewed at {last:.3g} s and runs out at {truth:.4g} s = "
                             f"{last:.3g} s + TTL {run.scenario.policy.lease_ttl:g} s, however early the owner died.")
    return Verdict(False, f"Look for the last claim or heartbeat of {lease['worker']} before the crash "
                          f"at {lease['end']:.3g} s in `run.events`; {hint}")


def check_lock_recovery(answer, run) -> Verdict:
    """01: with a lock (no expiry), when is the crashed owner's job claimed again? ('never')"""
    if answer is None:
        return _unanswered("what would have to happen for another worker to take a lock nobody releases?")
    recovered = run.recoveries["latency"].notna().any()
    never = (isinstance(answer, str) and answer.strip().lower() in ("never", "none", "inf", "infinity")) or \
        (_number(answer) is not None and math.isinf(_number(answer)))
    if recovered:
        raise ConfigError("check_lock_recovery: in this run the job was claimed again; pass the lock run")
    if never:
        return Verdict(True, f"In this run the job is still {run.jobs['status'].iloc[0]} at the horizon "
                             f"({run.scenario.horizon:g} s): a lock has no expiry, so nobody may take it.")
    return Verdict(False, "Nothing ever releases the lock: the dead owner cannot, and no clock runs out. "
                          "Answer 'never' (or math.inf).")


@cache
def _double_claims_by_strategy(seeds: tuple[int, ...] = (1, 2, 3)) -> dict[str, int]:
    import sim

    out = {}
    for strategy in STRATEGIES:
        out[strategy] = sum(int(sim.run("read-then-write-race", seed=s, **{
            "policy.claim": strategy, "workload.jobs": 120, "horizon": 90.0, "expect": []}).summary["double_claims"])
            for s in seeds)
    return out


def _strategy(answer) -> str:
    """A claim strategy as typed by a reader: ' Skip-Locked' -> 'skip_locked'."""
    return "_".join(str(answer).strip().lower().replace("-", " ").split())


def check_safe_claims(answer) -> Verdict:
    """02: which claim strategies never let two workers hold one job? (a set of names)"""
    if answer is None:
        return _unanswered(f"choose among {', '.join(STRATEGIES)}.")
    if isinstance(answer, str):
        answer = {answer}
    chosen = {_strategy(a) for a in answer}
    unknown = chosen - set(STRATEGIES)
    if unknown:
        return Verdict(False, f"{', '.join(sorted(unknown))}: not a claim strategy; choose among {', '.join(STRATEGIES)}.")
    counts = _double_claims_by_strategy()
    safe = {s for s, n in counts.items() if n == 0}
    evidence = "; ".join(f"{s}: {n} double claims" for s, n in counts.items())
    if chosen == safe:
        return Verdict(True, f"Measured on three contended runs each: {evidence}. The safe ones decide "
                             "and write in one atomic step (or hold the row lock from the read to the write).")
    missing, wrong = safe - chosen, chosen - safe
    parts = []
    if wrong:
        parts.append(f"{', '.join(sorted(wrong))} let two workers win")
    if missing:
        parts.append(f"{', '.join(sorted(missing))} is safe too")
    return Verdict(False, "; ".join(parts) + f". Measured: {evidence}.")


def check_convoy(answer, frame: pd.DataFrame) -> Verdict:
    """02: which strategy makes workers queue behind each other's row locks? (from claim_contention)"""
    if answer is None:
        return _unanswered("look at the middle panel: who spends time waiting on row locks?")
    waits = frame.groupby("claim")["lock_wait_seconds"].sum()
    truth = str(waits.idxmax())
    chosen = _strategy(answer)
    if chosen == truth:
        return Verdict(True, f"{truth} waited {waits[truth]:.3g} s on row locks in these runs: every worker "
                             "blocks on the same oldest row until its holder commits, one after another.")
    if chosen not in waits.index:
        return Verdict(False, f"{answer!r} is not a strategy of this experiment; choose among {', '.join(waits.index)}.")
    return Verdict(False, f"{chosen} waited {waits[chosen]:.3g} s on row locks; one strategy "
                          "waited far longer. A blocking lock makes the others wait, a skipped one does not.")


def pause_survival(ttl: float, *, heartbeat_interval: float = 5.0, pause: float = 12.0) -> bool:
    """Does a lease survive a stop-the-world pause of `pause` s that starts at the worst moment
    (just before a heartbeat is sent, so the last renewal is a full interval old)? Simulated."""
    import sim

    probe = sim.run(one_job(ttl=ttl, heartbeat_interval=heartbeat_interval, work=1000.0, workers=1, horizon=60.0,
                            name="pause-probe"))
    beats = probe.events.loc[probe.events["kind"] == "heartbeat", "t"].to_numpy(float)
    wake = (beats[1] if len(beats) > 1 else beats[0]) - 0.002  # the heartbeat statement takes 2 ms
    run = sim.run(one_job(ttl=ttl, heartbeat_interval=heartbeat_interval, work=1000.0, workers=1,
                          pause=(wake - 0.001, pause), horizon=wake + pause + ttl + 10.0, name="pause-probe"))
    return int(run.summary["false_expiries"]) == 0


def check_pause_ttl(answer, *, heartbeat_interval: float = 5.0, pause: float = 12.0) -> Verdict:
    """03: the smallest whole-second TTL whose lease survives the worst-placed pause."""
    if answer is None:
        return _unanswered("the pause can start just before a heartbeat, when the lease is already one interval old.")
    value = _number(answer)
    if value is None or isinstance(answer, bool):
        return Verdict(False, f"Give the TTL as a whole number of seconds, e.g. 20; {answer!r} is not a number.")
    if not value.is_integer():
        return Verdict(False, f"The exercise asks for whole seconds, and {value:g} s is not a whole number: give "
                              "the shortest TTL, in whole seconds, with which the lease never lapses.")
    if value <= heartbeat_interval:
        return Verdict(False, f"The TTL must at least exceed the heartbeat interval ({heartbeat_interval:g} s), "
                              "or the lease lapses between two renewals even without a pause.")
    survives = pause_survival(value, heartbeat_interval=heartbeat_interval, pause=pause)
    if not survives:
        return Verdict(False, f"With TTL {value:g} s the lease expired during the {pause:g} s pause: "
                              f"it was already about {heartbeat_interval:g} s old when the pause began.")
    smaller = pause_survival(value - 1, heartbeat_interval=heartbeat_interval, pause=pause)
    if smaller:
        return Verdict(False, f"TTL {value:g} s survives, but so does {value - 1:g} s: a longer TTL than needed "
                              "delays recovery after a real crash. Try smaller.")
    return Verdict(True, f"TTL {value:g} s survives and {value - 1:g} s does not: the TTL must exceed the "
                         f"longest stall ({pause:g} s) plus one heartbeat interval ({heartbeat_interval:g} s).")


def check_ttl_without_heartbeat(answer, *, seed: int = 1) -> Verdict:
    """03: a TTL with which no job of no-heartbeat-long-jobs loses its lease (and not wastefully long)."""
    import sim

    if answer is None:
        return _unanswered("without heartbeats the lease must outlast the whole job, PSP call included.")
    value = _number(answer)
    if value is None or value <= 0:
        return Verdict(False, "Give a TTL in seconds.")
    base = sim.preset("no-heartbeat-long-jobs")
    run = sim.run(base, seed=seed, **{"policy.lease_ttl": float(value)})
    longest = float((run.leases["released_at"] - run.leases["start"]).max())
    false = int(run.summary["false_expiries"])
    if false:
        return Verdict(False, f"With TTL {value:g} s, {false} leases still expired under a live owner; "
                              "the longest jobs take longer than that.")
    if value > 3 * longest:
        return Verdict(False, f"No false expiry, but the longest job in this run took {longest:.3g} s: a TTL of "
                              f"{value:g} s means a crashed job waits that long before anyone may retry it.")
    return Verdict(True, f"No lease expired under a live owner; the longest job here took {longest:.3g} s. "
                         "Without a heartbeat this is checklist item 2: TTL above the longest processing. "
                         "Note what it costs: a crash now waits out the whole TTL.")


def check_recovery_prediction(answer, *, ttl: float, heartbeat_interval: float, watcher_interval: float | None,
                              poll_interval: float, idle_pollers: int = 1) -> Verdict:
    """04: predict the mean recovery latency (within 5% of the formula)."""
    from sim.analytic import recovery_latency_mean

    if answer is None:
        return _unanswered("lease left at the crash, plus the wait for the watcher, plus the wait for a poller.")
    truth = recovery_latency_mean(ttl=ttl, heartbeat_interval=heartbeat_interval, poll_interval=poll_interval,
                                  watcher_interval=watcher_interval, idle_pollers=idle_pollers)
    value = _number(answer)
    parts = f"L - h/2 = {ttl - heartbeat_interval / 2:g} s"
    if watcher_interval is not None:
        parts += f", + W/2 = {watcher_interval / 2:g} s"
    parts += f", + P/(k+1) = {poll_interval / (idle_pollers + 1):.3g} s"
    if value is not None and abs(value - truth) <= 0.05 * truth:
        return Verdict(True, f"The formula gives {truth:.3g} s ({parts}).")
    return Verdict(False, "Add the three waits: the lease still has about L - h/2 to run, the watcher ticks "
                          "on average half an interval later, then an idle worker polls.")


def check_watcher_interval(answer, *, target: float, ttl: float, heartbeat_interval: float,
                           poll_interval: float) -> Verdict:
    """04: the longest watcher interval whose predicted mean recovery stays within `target` seconds
    (within 10% below the exact limit); longer intervals cost fewer statements."""
    from sim.analytic import recovery_latency_mean, watcher_load

    if answer is None:
        return _unanswered("solve L - h/2 + W/2 + P/2 <= target for W.")
    value = _number(answer)
    fixed = recovery_latency_mean(ttl=ttl, heartbeat_interval=heartbeat_interval, poll_interval=poll_interval)
    limit = 2 * (target - fixed)
    if limit <= 0:  # even an instant watcher misses the target: the right answer is "none"
        none = isinstance(answer, str) and answer.strip().lower() in ("none", "no", "never", "impossible")
        return Verdict(none, f"No watcher interval can reach a {target:g} s target: without any watcher wait the "
                             f"recovery already takes {fixed:.3g} s. Shorten the TTL instead (answer 'none').")
    if value is None or value <= 0:
        return Verdict(False, "Give a watcher interval in seconds.")
    predicted = recovery_latency_mean(ttl=ttl, heartbeat_interval=heartbeat_interval, poll_interval=poll_interval,
                                      watcher_interval=value)
    if predicted > target:
        return Verdict(False, f"W = {value:g} s gives {predicted:.3g} s on average, over the {target:g} s target.")
    if value < 0.9 * limit:
        return Verdict(False, f"W = {value:g} s meets the target ({predicted:.3g} s), but a longer interval would too, "
                              f"for fewer watcher statements ({watcher_load(watcher_interval=value):.3g}/s now).")
    return Verdict(True, f"W = {value:g} s gives {predicted:.3g} s on average, within {target:g} s, for "
                         f"{watcher_load(watcher_interval=value):.3g} watcher statements per second.")


def redelivery_puzzle(db: Backend | None = None) -> tuple[pd.Series, pd.DataFrame]:
    """05's puzzle: evt-7 is delivered three times. The first delivery's consumer crashes right
    after its marker insert; then two deliveries arrive at once (B inserts its marker first, C's
    insert waits on it). Returns (ledger rows per event, the transcript)."""
    script = Script(db)
    first = Delivery(script, "A", "evt-7")
    first.start()
    first.crash()
    b, c = Delivery(script, "B", "evt-7", attempt=2), Delivery(script, "C", "evt-7", attempt=3)
    script.at(1.0)
    b.start()
    c.start()
    b.finish()
    c.finish()
    counts = ledger_counts(script)
    transcript = script.transcript
    script.close()
    return counts, transcript


def check_ledger_rows(answer) -> Verdict:
    """05: how many ledger rows does evt-7 end with? (computed by redelivery_puzzle())"""
    if answer is None:
        return _unanswered("what happens to a marker whose transaction never commits?")
    counts, _ = redelivery_puzzle()
    truth = int(counts.get("evt-7", 0))
    value = _number(answer)
    if value is not None and value == truth:
        return Verdict(True, f"{truth} ledger row: A's crash rolled its marker back, so the event stayed eligible; "
                             "B's marker and effect committed together; C waited on B's uncommitted marker, "
                             "then found it and skipped the effect.")
    return Verdict(False, "Follow the marker: the crash rolls back everything A's transaction did; of B and C, "
                          "the second insert waits for the first transaction to end, then sees its marker.")


def check_retention(answer, *, window: float = 60.0, purge_every: float = 5.0, events: int = 200) -> Verdict:
    """05: the shortest retention that lets no duplicate through, whatever the sample: `window`.

    The purge deletes markers older than the retention, so a retention >= window keeps every
    marker until its last redelivery; a shorter one loses the latest redeliveries, even when a
    sample of `events` happens to have none that late (the simulation is shown as evidence).
    Retentions more than one purge interval above the window are correct but not the shortest.
    """
    if answer is None:
        return _unanswered("a redelivery can come as late as the redelivery window allows.")
    value = _number(answer)
    if value is None or value < 0 or math.isinf(value):
        return Verdict(False, "Give a retention in seconds.")
    frame = retention_experiment(value, window=window, purge_every=purge_every, events=events)
    dupes = int(frame["duplicate"].sum())
    if dupes:
        late = float(frame.loc[frame["duplicate"], "delay"].min())
        return Verdict(False, f"With {value:g} s of retention, {dupes} of {events} redeliveries found no marker "
                              f"and were applied again (the earliest came {late:.3g} s after the first delivery).")
    if value < window:
        return Verdict(False, f"No duplicate in this sample of {events} events, but only because none came late "
                              f"enough: a redelivery may arrive up to {window:g} s after the first delivery, and "
                              f"with {value:g} s of retention its marker may already be purged. Test against the "
                              "worst case, not a sample.")
    if value > window + purge_every:
        return Verdict(False, f"No duplicate, but {value:g} s keeps markers longer than the {window:g} s "
                              "redelivery window needs: the table only grows. Try shorter.")
    return Verdict(True, f"No duplicate in {events} events with {value:g} s of retention, and none possible: "
                         f"every marker outlives the latest redelivery ({window:g} s). Keep dedup state at least "
                         "as long as redeliveries may come.")


def _infeasible_because(row: pd.DataFrame, advice) -> str:
    """Why the advisor left a candidate (a one-row frame of its table) out: the rules it fails
    (advisor.feasibility_rules), in words."""
    from sim.advisor import feasibility_rules

    passed = feasibility_rules(row, advice.target_false_expiry, advice.inputs).iloc[0]
    inputs, row = advice.inputs, row.iloc[0]
    margin, per_ttl, latency = inputs["margin"], inputs["heartbeats_per_ttl"], inputs["statement_latency"]
    hb = row["heartbeat_interval"]
    words = {
        "target": lambda: (f"its predicted false expiry {percent(row['predicted_false_expiry'])} is above the target "
                           f"divided by the safety margin ({percent(advice.target_false_expiry)} / {margin:g})"),
        "heartbeats_per_ttl": lambda: (
            f"a TTL must last at least {per_ttl:g} heartbeat intervals plus statement latency "
            f"({per_ttl:g} x ({hb:g} s + {1000 * latency:g} ms) = {per_ttl * (hb + latency):.6g} s), so "
            "that one lost heartbeat does not lapse the lease"),
        "max_db_load": lambda: f"it costs {row['db_load']:.3g} statements/s, over max_db_load",
        "min_ttl": lambda: f"it is below the TTL floor of {inputs['min_ttl']:g} s",
    }
    return "; ".join(words[rule]() for rule, ok in passed.items() if not ok) or "the advisor marked it infeasible"


def check_smallest_ttl(answer, advice, *, heartbeat_interval: float | None, watcher_interval: float) -> Verdict:
    """06: the smallest feasible TTL in advice.candidates for this heartbeat and watcher interval.

    Feasible is the advisor's rule, not only the target: predicted false expiry within target /
    margin AND (with a heartbeat) TTL >= heartbeats_per_ttl x (interval + statement latency). A
    wrong answer on the ladder is told which rule its row breaks.
    """
    if answer is None:
        return _unanswered("filter advice.candidates on heartbeat_interval, watcher_interval and feasible.")
    table = advice.candidates
    hb = table["heartbeat_interval"].isna() if heartbeat_interval is None else table["heartbeat_interval"] == heartbeat_interval
    mine = table[hb & (table["watcher_interval"] == watcher_interval)]
    rows = mine[mine["feasible"]]
    if rows.empty:
        never = isinstance(answer, str) and answer.strip().lower() in ("none", "never")
        return Verdict(never or answer == math.inf, "No TTL is feasible for that heartbeat and watcher interval.")
    truth = float(rows["ttl"].min())
    value = _number(answer)
    best = rows.loc[rows["ttl"].idxmin()]
    if value is not None and value == truth:
        return Verdict(True, f"TTL {truth:g} s: predicted false expiry {percent(best['predicted_false_expiry'])} per job, "
                             f"recovery {seconds(best['predicted_recovery_mean'])}.")
    same = mine[mine["ttl"] == value] if value is not None else mine.iloc[0:0]
    if len(same) and not bool(same["feasible"].iloc[0]):
        return Verdict(False, f"TTL {value:g} s is on the ladder but not feasible: {_infeasible_because(same.iloc[[0]], advice)}. "
                              "Keep only the rows with feasible == True.")
    if len(same):
        return Verdict(False, f"TTL {value:g} s is feasible, but a smaller TTL on the ladder is too.")
    return Verdict(False, "Keep only the feasible rows for that heartbeat and watcher interval, then take the "
                          "smallest ttl.")


def check_fastest_peer(answer, frame: pd.DataFrame) -> Verdict:
    """07: which peer claims a crashed job again soonest? (from compare_peers)"""
    if answer is None:
        return _unanswered("compare the bars; a missing bar means never.")
    means = frame.set_index("label")["recovery_latency_mean_mean"]
    truth = str(means.idxmin())
    names = {str(x).lower(): str(x) for x in frame["label"]} | {str(x).lower(): str(y) for x, y in zip(frame["peer"], frame["label"], strict=True)}
    chosen = names.get(str(answer).strip().lower())
    if chosen == truth:
        return Verdict(True, f"{truth}: {seconds(means[truth])} on average. Its lease is short and nothing "
                             "else has to happen before the next claim.")
    if chosen is None:
        return Verdict(False, f"{answer!r} is not one of {', '.join(frame['label'])}.")
    return Verdict(False, f"{chosen} takes {seconds(means.get(chosen, np.nan))} on average; look for the shortest bar.")


def check_duplicating_peers(answer, frame: pd.DataFrame) -> Verdict:
    """07: which peers ran some job twice because a live owner's lease expired? (set of labels)"""
    if answer is None:
        return _unanswered("look at the 'jobs run twice' column.")
    if isinstance(answer, str):
        answer = {answer}
    names = {str(x).lower(): str(x) for x in frame["label"]} | {str(x).lower(): str(y) for x, y in zip(frame["peer"], frame["label"], strict=True)}
    chosen = {names.get(str(a).strip().lower(), str(a)) for a in answer}
    twice = frame.set_index("label")["double_processed_jobs_mean"]
    truth = set(twice[twice > 0].index)
    if chosen == truth:
        return Verdict(True, f"{', '.join(sorted(truth)) or 'none'}: their lease ran out while a slow job "
                             "was still running, and nothing renewed it.")
    return Verdict(False, "Read the 'jobs run twice' column: any peer with a mean above 0 belongs in the set.")


def stuck_jobs_fixture(db, *, jobs: int = 6, now: float = 100.0) -> dict:
    """Fill a backend's tables with jobs in every state, some of them stuck (Processing, lease
    expired at `now`) and one Processing with a lease still valid at `now` (claimed `ttl` / 3
    before it), so that a query that forgets the lease condition, or reads the server's own
    now() instead of the bound clock, returns a wrong set. Returns {"now": now, "stuck": [ids],
    "alive": [ids]} for check_stuck_query()."""
    if jobs < 5:
        raise ConfigError(f"stuck_jobs_fixture: need at least 5 jobs for every state, got {jobs}")
    ttl = 30.0
    script = Script(db)
    script.connect("setup")
    for i in range(1, jobs + 1):
        script.at(0.0).sql("setup", "insert_job", id=i, event_id=f"evt-{i}", payload="{}")
    claimed = [i for i in range(1, jobs + 1) if i % 3 != 0]  # the others stay Pending
    for i in claimed:
        live = i == claimed[-1]  # its owner is still working: claimed shortly before `now`
        at = now - ttl / 3 if live else min(float(10 * i), now - ttl - 1.0)
        script.at(at).sql("setup", "claim_conditional", id=i, owner=f"w{i % 2}", ttl=ttl)
        if i % 3 == 1 and i > 2 and not live:
            script.sql("setup", "complete_fenced", id=i, owner=f"w{i % 2}", attempt=1)
    stuck = [row[0] for row in script.at(now).sql("setup", "select_stuck_jobs")]
    return {"now": now, "stuck": stuck, "alive": [claimed[-1]]}


def check_stuck_query(answer: str | None, db, fixture: dict) -> Verdict:
    """08: the reader's SQL for "stuck jobs" (bind %(now)s) must return the stuck ids first column."""
    if answer is None or not str(answer).strip():
        return _unanswered("status = 'Processing' AND lease_until < %(now)s; the clock is a bound parameter.")
    from sim.db.base import to_timestamp

    try:
        frame = sql_frame(db, answer, {"now": to_timestamp(fixture["now"])} if "%(now)s" in answer else None)
    except Exception as exc:  # the reader's SQL: any server error is the feedback
        return Verdict(False, f"PostgreSQL said: {str(exc).strip().splitlines()[0]}")
    if frame.empty and fixture["stuck"]:
        return Verdict(False, "Your query returned no rows, but some jobs are stuck.")
    got = sorted(int(v) for v in frame.iloc[:, 0]) if len(frame) else []
    if got == sorted(fixture["stuck"]):
        return Verdict(True, f"Jobs {got}: Processing with an expired lease. This is what the watcher looks "
                             "for; an index on lease_until keeps it cheap.")
    alive = sorted(set(got) & set(fixture.get("alive", [])))
    if alive:
        return Verdict(False, f"Your query returned ids {got}, including {alive}: Processing, but with a lease still "
                              f"valid at the clock's {fixture['now']:g} s, so its owner may still be working. Compare "
                              "lease_until with the bound %(now)s, not with the server's now().")
    return Verdict(False, f"Your query returned ids {got}; the stuck ones are Processing jobs whose lease_until "
                          "is before now.")


# ---- coverage: the seed's concepts and checklist -> notebook cells ---------------------------------

REQUIRED_TAGS = {
    "concept:lease": "Lease: a time-stamped record that a worker owns a job for a limited time",
    "concept:conditional-update": "Conditional UPDATE: one atomic statement that claims only if the expected condition holds",
    "concept:lease-ttl": "Lease TTL: how long a claim lasts before the job can be taken again",
    "concept:stuck-watcher": "Stuck watcher: a periodic job that makes expired, unfinished work claimable again",
    "confused:lease-vs-lock": "A lease is not a lock: it expires; a lock can stay forever if its holder dies",
    "confused:read-then-write-vs-conditional-update": "Read-then-write races; the conditional UPDATE is atomic",
    "confused:nack-vs-lease": "Nack / visibility timeout manages message visibility; a lease keeps job state and attempts",
    "checklist:1": "The claim is one atomic UPDATE ... WHERE, not read-then-write",
    "checklist:2": "The TTL really exceeds the longest expected processing",
    "checklist:3": "Long jobs renew their lease by heartbeat",
    "checklist:4": "The stuck watcher runs periodically",
    "checklist:5": "lease_owner is stored for diagnosis",
    "checklist:6": "attempts is incremented on every lease and persisted",
}
DEDUP_TAGS = {
    "dedup:marker-and-effect": "The dedup marker and the DB effect commit (or roll back) in one transaction",
    "dedup:twice": "An event delivered twice: the stored effect happens once",
    "dedup:concurrent": "Two deliveries at once: the second marker insert waits, then skips",
    "dedup:crash-after-marker": "A failure after the marker insert rolls back and leaves the event eligible",
    "dedup:payload-mismatch": "Same event id, other payload: rejected by a documented policy",
    "dedup:external-effects": "A PSP charge is not atomic with the DB: idempotency key, outbox or reconciliation",
    "dedup:retention": "Keep dedup state at least as long as the redelivery window",
}


def _notebooks_dir(directory: str | Path | None) -> Path:
    if directory is not None:
        return Path(directory)
    here = Path.cwd()
    if (here / "00-index.ipynb").exists():
        return here
    return Path(__file__).resolve().parent.parent / "notebooks"


def coverage(directory: str | Path | None = None, tags: Mapping[str, str] | None = None) -> pd.DataFrame:
    """One row per (tag, cell) of the notebooks in `directory`: the notebook, the section (the
    nearest heading above the cell) and the cell's index. Tags missing from every notebook appear
    once with an empty notebook, so a gap is visible. `tags` defaults to REQUIRED_TAGS + DEDUP_TAGS."""
    wanted = dict(tags if tags is not None else {**REQUIRED_TAGS, **DEDUP_TAGS})
    rows = []
    for path in sorted(_notebooks_dir(directory).glob("[0-9][0-9]-*.ipynb")):
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        section = ""
        for i, cell in enumerate(cells):
            source = "".join(cell.get("source", []))
            if cell["cell_type"] == "markdown":
                for line in source.splitlines():
                    if line.startswith("#"):
                        section = line.lstrip("#").strip()
            for tag in cell.get("metadata", {}).get("tags", []):
                if tag in wanted:
                    rows.append({"tag": tag, "meaning": wanted[tag], "notebook": path.name, "section": section,
                                 "cell": i, "cell_type": cell["cell_type"]})
    frame = pd.DataFrame(rows, columns=["tag", "meaning", "notebook", "section", "cell", "cell_type"])
    missing = [{"tag": t, "meaning": m, "notebook": "", "section": "", "cell": -1, "cell_type": ""}
               for t, m in wanted.items() if t not in set(frame["tag"])]
    if missing:
        frame = pd.concat([frame, pd.DataFrame(missing)], ignore_index=True)
    order = {t: i for i, t in enumerate(wanted)}
    return frame.sort_values(["tag", "notebook", "cell"], key=lambda s: s.map(order) if s.name == "tag" else s) \
        .reset_index(drop=True)


def link_html(folder: str | Path) -> list[Path]:
    """In HTML pages rendered from the notebooks (make html), point links to NN-name.ipynb at
    NN-name.html, so that the pages link to each other. Returns the files changed."""
    import re

    changed = []
    for page in sorted(Path(folder).glob("*.html")):
        text = page.read_text(encoding="utf-8")
        linked = re.sub(r'href="(\d\d-[A-Za-z0-9-]+)\.ipynb(#[^"]*)?"', r'href="\1.html\2"', text)
        if linked != text:
            page.write_text(linked, encoding="utf-8")
            changed.append(page)
    return changed


def coverage_markdown(frame: pd.DataFrame) -> str:
    """coverage() as a Markdown table with a link to each notebook."""
    lines = ["| tag | what it means | shown in |", "|---|---|---|"]
    for tag, group in frame.groupby("tag", sort=False):
        places = dict.fromkeys((r.notebook, r.section) for r in group.itertuples())
        where = "; ".join(f"[{notebook}]({notebook}) ({section})" if notebook else "**not shown anywhere**"
                          for notebook, section in places)
        lines.append(f"| `{tag}` | {group['meaning'].iloc[0]} | {where} |")
    return "\n".join(lines)
