"""A worker's own clock (policy.clock = "worker"): the database's time plus a constant offset, a
drift rate in parts per million and scripted steps (an NTP step, a VM resumed from a snapshot).
The database's clock itself may step too (faults.db_clock_steps: DbClock).

Every time the worker binds (`now`, and `lease_until` = now + TTL, a backoff's due time) reads this
clock; the watcher and the producer read the database's. So an offset or a drift shows up exactly
where the worker stamps a time that someone with another clock compares: a lease the watcher finds
expired early or late, a claim that takes another worker's lease before its owner's clock says so.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable

from sim.model.faults import clock_offset
from sim.scenario import Scenario
from sim.support.rng import Streams

PPM = 1e-6


class WorkerClock:
    """t_worker = t + offset + rate * t + (the sum of the steps taken at or before t)."""

    __slots__ = ("offset", "rate", "_step_at", "_stepped")

    def __init__(
        self,
        offset: float = 0.0,
        drift_ppm: float = 0.0,
        steps: Iterable[tuple[float, float]] = (),
    ):
        self.offset = (
            offset  # the constant part (a normal draw of faults.clock_skew + clock_offset)
        )
        self.rate = drift_ppm * PPM
        ordered = sorted(steps)  # (at, by)
        self._step_at = [at for at, _ in ordered]
        self._stepped, total = [0.0], 0.0  # the sum of the steps taken so far, after each step
        for _, by in ordered:
            total += by
            self._stepped.append(total)

    def at(self, t: float) -> float:
        """The worker's reading when the database's clock reads `t`."""
        reading = t + self.offset + self.rate * t
        if self._step_at:
            reading += self._stepped[bisect.bisect_right(self._step_at, t)]
        return reading

    def offset_at(self, t: float) -> float:
        """How far ahead of the database's clock the worker's is at `t` (negative: behind)."""
        return self.at(t) - t


def worker_clock(scenario: Scenario, index: int, streams: Streams) -> WorkerClock | None:
    """Worker `index`'s clock under policy.clock = "worker", or None when it reads the database's
    time: its constant offset (sim.model.faults.clock_offset: a draw of faults.clock_skew plus
    faults.clock_offset), a drift of faults.clock_drift_ppm and its scripted clock steps."""
    if scenario.policy.clock != "worker":
        return None
    faults = scenario.faults
    offset = clock_offset(scenario, index, streams)
    steps = [(s.at, s.by) for s in faults.clock_steps if s.worker == index]
    if not (offset or faults.clock_drift_ppm or steps):
        return None
    return WorkerClock(offset, faults.clock_drift_ppm, steps)


class DbClock(WorkerClock):
    """The database's clock under faults.db_clock_steps: true time plus the steps taken so far.
    Every client without a clock of its own binds it (the watcher, the producer, workers on
    policy.clock = "db"), so a step moves every deadline compared with it at once."""

    __slots__ = ()

    def __init__(self, steps: Iterable[tuple[float, float]]):
        super().__init__(0.0, 0.0, steps)

    def reaches(self, reading: float, after: float) -> float:
        """The first true time at or after `after` at which this clock reads `reading` or more:
        when the database finds a lease stamped `reading` expired."""
        i = bisect.bisect_right(self._step_at, after)
        t = after
        while True:
            due = max(t, reading - self._stepped[i])
            following = self._step_at[i] if i < len(self._step_at) else math.inf
            if due < following:
                return due
            t, i = following, i + 1


def db_clock(scenario: Scenario) -> DbClock | None:
    """The database's clock of a run (faults.db_clock_steps), or None: it reads true time."""
    steps = [(s.at, s.by) for s in scenario.faults.db_clock_steps]
    return DbClock(steps) if steps else None
