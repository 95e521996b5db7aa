"""Fault schedules drawn up front from each worker's own streams: crashes, pauses, partitions."""

from __future__ import annotations

import bisect
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from typing import Protocol

import numpy as np
import simpy

from sim.model.events import EventLog
from sim.model.waits import Waits
from sim.protocol import Lease
from sim.scenario import Faults, Scenario
from sim.scenario.settings import CrashPoint, DbClockStep
from sim.support.rng import Streams


class CrashPoints:
    """Decides, from its own stream, whether a worker reaching a point of interest crashes there."""

    def __init__(self, configs: Iterable[CrashPoint], rng: np.random.Generator):
        self.configs = {c.point: c for c in configs}
        self.fired: Counter[str] = Counter()
        self.rng = rng

    def fires(self, point: str) -> bool:
        config = self.configs.get(point)
        if config is None or self.spent(point) >= config.limit:
            return False
        if config.probability < 1 and self.rng.random() >= config.probability:
            return False
        return self.spend(point, config.limit)

    def spent(self, point: str) -> int:
        """How many crashes the point has caused in the run so far."""
        return self.fired[point]

    def spend(self, point: str, limit: int) -> bool:
        """Count one more crash at the point (True: it is within the run's limit)."""
        self.fired[point] += 1
        return True


def poisson_times(rate_per_hour: float, horizon: float, rng: np.random.Generator) -> list[float]:
    """Event times of a Poisson process with the given rate per hour, in [0, horizon)."""
    if rate_per_hour <= 0:
        return []
    mean_gap = 3600.0 / rate_per_hour
    times: list[float] = []
    t = 0.0
    while True:
        t += float(rng.exponential(mean_gap))
        if t >= horizon:
            return times
        times.append(t)


class OutageCalendar:
    """Non-overlapping [start, end) intervals during which a worker is paused (or partitioned)."""

    def __init__(self, intervals: list[tuple[float, float]]):
        merged: list[list[float]] = []
        for start, end in sorted(intervals):
            if merged and start <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], end)
            else:
                merged.append([start, end])
        self.intervals = [(s, e) for s, e in merged]
        self._starts = [s for s, _ in self.intervals]

    @classmethod
    def draw(
        cls,
        scripted: Iterable[tuple[float, float]],
        rate_per_hour: float,
        duration: Callable[[], float],
        horizon: float,
        rng: np.random.Generator,
    ) -> OutageCalendar:
        """Scripted (at, duration) entries plus a Poisson stream of outages with sampled
        durations."""
        intervals = [(at, at + d) for at, d in scripted]
        intervals += [(t, t + duration()) for t in poisson_times(rate_per_hour, horizon, rng)]
        return cls(intervals)

    def __bool__(self) -> bool:
        return bool(self.intervals)

    def end_of(self, t: float) -> float | None:
        """The end of the outage covering t, or None."""
        i = bisect.bisect_right(self._starts, t) - 1
        if i >= 0 and t < self.intervals[i][1]:
            return self.intervals[i][1]
        return None

    def work_end(self, t: float, work: float) -> float:
        """When `work` seconds of progress started at t finish, frozen during outages."""
        i = bisect.bisect_right(self._starts, t) - 1
        if i >= 0 and t < self.intervals[i][1]:
            t = self.intervals[i][1]
        i += 1
        remaining = work
        while i < len(self.intervals):
            start, end = self.intervals[i]
            if start >= t + remaining:
                break
            remaining -= start - t
            t = end
            i += 1
        return t + remaining


def worker_outages(
    faults: Faults, i: int, streams: Streams, horizon: float
) -> tuple[OutageCalendar, OutageCalendar]:
    """Worker i's pauses and partitions: its scripted ones plus its own Poisson streams (model and
    live)."""
    pauses = OutageCalendar.draw(
        [(p.at, p.duration) for p in faults.pauses if p.worker == i],
        faults.pause_rate,
        faults.pause_duration.sampler(streams.generator(f"worker/{i}/pause-duration")),
        horizon,
        streams.generator(f"worker/{i}/pauses"),
    )
    partitions = OutageCalendar.draw(
        [(p.at, p.duration) for p in faults.partitions if p.worker == i],
        faults.partition_rate,
        faults.partition_duration.sampler(streams.generator(f"worker/{i}/partition-duration")),
        horizon,
        streams.generator(f"worker/{i}/partitions"),
    )
    return pauses, partitions


def clock_offset(scenario: Scenario, i: int, streams: Streams) -> float:
    """Worker i's constant clock offset from the database's (policy.clock = worker): its own draw
    from a normal of standard deviation faults.clock_skew, plus faults.clock_offset; 0 on the
    database's clock (model and live)."""
    f = scenario.faults
    if scenario.policy.clock != "worker":
        return 0.0
    skew = 0.0
    if f.clock_skew > 0:
        skew = float(streams.generator(f"worker/{i}/clock").normal(0.0, f.clock_skew))
    return skew + f.clock_offset


def worker_crash_times(faults: Faults, i: int, streams: Streams, horizon: float) -> list[float]:
    """Worker i's scripted crashes, plus its own Poisson crashes when faults.crash_target is
    "any"."""
    times = [c.at for c in faults.crashes if c.worker == i]
    if faults.crash_target == "any":
        times += poisson_times(faults.crash_rate, horizon, streams.generator(f"worker/{i}/crashes"))
    return times


def holder_crash_times(
    faults: Faults, workers: int, streams: Streams, horizon: float
) -> list[float]:
    """The pool-wide crash clock of crash_target "holder": crash_rate x workers per hour."""
    if faults.crash_target != "holder":
        return []
    return poisson_times(faults.crash_rate * workers, horizon, streams.generator("crashes/holder"))


class Crashable(Protocol):
    """What a crash needs of a worker (sim.model.worker.Worker): whether it is up, the lease it
    holds and its process to interrupt."""

    @property
    def up(self) -> bool: ...
    @property
    def lease(self) -> Lease | None: ...
    @property
    def process(self) -> simpy.Process: ...


def log_outages(
    env: simpy.Environment, log: EventLog, worker: str, calendar: OutageCalendar, kind: str
) -> Waits[None]:
    """Process: write `<kind>_start` / `<kind>_end` records at the calendar's times."""
    for start, end in calendar.intervals:
        yield env.timeout(start - env.now)
        log.add(env.now, f"{kind}_start", worker, None, None, end - start)
        yield env.timeout(end - env.now)
        log.add(env.now, f"{kind}_end", worker, None, None, None)


def log_db_clock_steps(
    env: simpy.Environment, log: EventLog, steps: Iterable[DbClockStep]
) -> Waits[None]:
    """Process: a `clock_step` record of the database at each of its scripted steps."""
    for step in sorted(steps, key=lambda s: s.at):
        yield env.timeout(step.at - env.now)
        log.add(env.now, "clock_step", "db", None, None, step.by)


def inject_crashes(env: simpy.Environment, worker: Crashable, times: list[float]) -> Waits[None]:
    """Process: crash `worker` (a SimPy interrupt) at each time it is up."""
    for t in sorted(times):
        yield env.timeout(t - env.now)
        if worker.up:
            worker.process.interrupt("crash")


def crash_owner(
    env: simpy.Environment, workers: Sequence[Crashable], job: int, at: float
) -> Waits[None]:
    """Process: at `at`, crash whichever live worker holds a lease on `job` (if any)."""
    yield env.timeout(at)
    for worker in workers:
        if worker.up and worker.lease is not None and worker.lease.job == job:
            worker.process.interrupt("crash")


def crash_holders(
    env: simpy.Environment,
    workers: Sequence[Crashable],
    times: list[float],
    rng: np.random.Generator,
) -> Waits[None]:
    """Process: at each time, crash one worker chosen uniformly among those holding a job (if
    any)."""
    for t in times:
        yield env.timeout(t - env.now)
        holders = [w for w in workers if w.up and w.lease is not None]
        if holders:
            holders[int(rng.integers(len(holders)))].process.interrupt("crash")
