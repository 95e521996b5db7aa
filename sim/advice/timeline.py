"""The run that explains an advice: a short run of A (the recommendation) with one stop-the-world
pause longer than A's lease survives, on a worker holding a job (a false expiry: another worker
may take the job while its owner is frozen), and, after it, one crash of another job holder (the
recovery the advice predicts). Its lease timeline, with both marked, is the advice page's picture.

Random faults are off, so the run shows exactly these two; the times are taken from the run itself
(the pause and the crash land inside a lease), so the story holds for any queue's durations.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from sim.support.in_words import count, duration, percent
from sim.theory import closed_forms

JOBS = 80
SETTLE = 5.0  # seconds of the run before the pause, and between the pause's end and the crash


@dataclass(frozen=True)
class Explained:
    """The run, and what it shows (all from the run's own records)."""

    run: object  # sim.results.Run
    pause_worker: int
    pause_at: float
    pause: float  # seconds
    slack: float  # what A's lease survives (TTL - heartbeat - latency, or the TTL alone)
    pause_share: float  # the share of the assumed pauses at least this long
    crash_worker: int
    crash_at: float
    recovered_at: float
    false_expiries: int

    @property
    def recovery(self) -> float:
        return self.recovered_at - self.crash_at

    @property
    def window(self) -> tuple[float, float]:
        return (max(0.0, self.pause_at - 3.0), self.recovered_at + 4.0)

    def caption(self) -> str:
        """What the picture shows, from its own numbers."""
        return (
            f"A short run of A with the two events that make its risk and its recovery: worker "
            f"w{self.pause_worker} freezes for {duration(self.pause)} at {self.pause_at:.1f} s "
            f"(a stop-the-world pause; {percent(self.pause_share)} of the assumed pauses last "
            f"that long), longer than the {duration(self.slack)} A's lease survives, so its lease "
            f"expires under it ({count(self.false_expiries, 'false expiry', 'false expiries')} in "
            f"this run) and another worker may take the job; worker w{self.crash_worker} crashes "
            f"at {self.crash_at:.1f} s and its job is claimed again {duration(self.recovery)} "
            f"later. Bars are leases; shaded lanes are pauses and down time; x marks the crash."
        )


def explain(advice, seed: int = 1) -> Explained:
    """Explained for `advice` (see the module docstring)."""
    from sim.runner import run as simulate
    from sim.scenario.settings import ScriptedCrash, ScriptedOutage

    a, h = advice.assumptions, advice.heartbeat_interval
    slack = advice.ttl - (h or 0.0) - a.statement_latency if h is not None else advice.ttl
    assumed = advice.scenario(jobs=1).faults
    quiet = dataclasses.replace(assumed, crash_rate=0.0, pause_rate=0.0, partition_rate=0.0)
    reach = advice.ttl + advice.watcher_interval + advice.inputs["poll_interval"] + 1.0
    pause = max(float(a.pause_duration.quantile(0.99)), slack + 1.0, reach)
    into = min(0.3, 0.25 * advice.inputs["durations_median"])
    span = 3 * SETTLE + pause + 2 * reach + advice.inputs["durations_p99"]
    jobs = max(JOBS, int(np.ceil(advice.inputs["jobs_per_s"] * span)) + JOBS // 2)
    base = advice.scenario(jobs=jobs, seed=seed, name="advice-explained", tail=1.0)
    base = base.replace(faults=quiet)
    worker, at = _inside_a_lease(simulate(base, progress=False), SETTLE, into)
    paused = base.replace(
        faults=dataclasses.replace(quiet, pauses=(ScriptedOutage(worker, at, pause),))
    )
    crash_worker, crash_at = _inside_a_lease(
        simulate(paused, progress=False), at + pause + SETTLE, into, avoid=worker
    )
    faults = dataclasses.replace(paused.faults, crashes=(ScriptedCrash(crash_at, crash_worker),))
    shown = simulate(paused.replace(faults=faults), progress=False)
    recoveries = shown.recoveries
    mine = recoveries[np.isclose(recoveries["crash_at"].astype(float), crash_at)]
    recovered = float(mine["reclaimed_at"].iloc[0]) if len(mine) else float("nan")
    return Explained(
        run=shown,
        pause_worker=worker,
        pause_at=at,
        pause=pause,
        slack=slack,
        pause_share=float(closed_forms.survival(a.pause_duration, pause)),
        crash_worker=crash_worker,
        crash_at=crash_at,
        recovered_at=recovered,
        false_expiries=int(shown.summary["false_expiries"]),
    )


def _inside_a_lease(run, after: float, into: float, avoid: int | None = None) -> tuple[int, float]:
    """(worker, time) `into` seconds into the first lease that starts after `after` and lasts
    longer than that, on a worker other than `avoid`."""
    leases = run.leases
    workers = leases["worker"].str.removeprefix("w").astype(int)
    long = (leases["end"] - leases["start"] > 2 * into) & (leases["start"] > after)
    if avoid is not None:
        long &= workers != avoid
    if not long.any():
        raise RuntimeError("the explaining run has no lease long enough to show a fault in")
    first = leases[long].sort_values("start").index[0]
    return int(workers[first]), float(leases.loc[first, "start"] + into)
