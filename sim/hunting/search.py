"""The search loop: candidates in their deterministic order, checked in this process, in a local
process pool (--parallel N) or on any concurrent.futures Executor (a Dask client's), until the
time or the schedules run out, the grid is exhausted, every invariant hunted is broken, or someone
cuts it off (Ctrl-C, SIGTERM): it then says what it found and how much of the space it covered.

Chunks are collected in the order they were handed out, so what was checked is always a prefix of
the candidate order: the same seed checks the same schedules in the same order on any machine;
only how far it gets in its time differs (--schedules N fixes that too).
"""

from __future__ import annotations

import concurrent.futures as cf
import itertools
import time
from collections import Counter
from dataclasses import dataclass, field, replace

from sim.hunting.runner import check
from sim.hunting.space import Schedule, Scope
from sim.hunting.strategies import candidates

CHUNK = 64  # candidates per task handed to a process: enough to hide the hand-over


@dataclass(frozen=True)
class Found:
    """The smallest schedule (Schedule.size) the search saw break an invariant, where it came
    from, and when the search first saw the invariant break."""

    invariant: str
    schedule: Schedule
    number: int  # its place in the candidate order (0-based)
    strategy: str  # grid, swarm, pct, screen
    after: float  # seconds into the hunt when the invariant first broke
    first: int  # the place of the first schedule that broke it
    seen: int = 1  # how many checked schedules broke it


@dataclass
class Coverage:
    """How much of the space a search checked, and why it stopped."""

    checked: int = 0
    by_strategy: Counter = field(default_factory=Counter)
    grid_total: int = 0  # schedules in the levels of the grid grown so far (sim.hunting.grid)
    grid_levels: int = 0  # levels grown: every schedule with up to levels - 1 faults is known
    grid_checked: int = 0
    seconds: float = 0.0
    stopped: str = ""  # time, schedules, exhausted, all found, interrupted
    cpu_seconds: float = 0.0  # process time of this process (the workers' is not counted)

    @property
    def rate(self) -> float:
        """Schedules checked per wall second."""
        return self.checked / self.seconds if self.seconds > 0 else 0.0

    def lines(self) -> list[str]:
        strategies = ", ".join(f"{n} {s}" for s, n in sorted(self.by_strategy.items()))
        return [
            f"checked {self.checked} schedules in {self.seconds:.1f} s ({self.rate:,.0f}/s; "
            f"{strategies or 'none'}){self._grid()}; stopped: {self.stopped}"
        ]

    def _grid(self) -> str:
        """How far the grid's walk got: its levels (numbers of faults) walked in full."""
        if not self.grid_checked:
            return ""
        if not self.grid_levels:
            return f"; grid: {self.grid_checked:,} checked, its fault-free level not yet complete"
        faults, total = self.grid_levels - 1, self.grid_total
        if self.grid_checked >= total:
            return (
                f"; grid: {self.grid_checked:,} checked, among them all {total:,} with up to "
                f"{faults} fault(s)"
            )
        return (
            f"; grid: {self.grid_checked:,} of the {total:,} schedules with up to {faults} "
            f"fault(s) ({self.grid_checked / total:.1%})"
        )


def _check_chunk(scope: Scope, schedules: list[Schedule]) -> list[Counter]:
    """In a worker: each schedule's violations (of the scope's invariants)."""
    return [check(scope, schedule) for schedule in schedules]


def search(
    scope: Scope,
    grid,
    *,
    seed: int,
    exhaustive: bool,
    seconds: float,
    schedules: int | None,
    executor: cf.Executor | None,
    workers: int,
    lead=(),
    progress=None,
    began: float | None = None,
) -> tuple[dict[str, Found], Coverage]:
    """Check candidates until a stop; the first schedule that broke each invariant. `lead`:
    (strategy, schedule) pairs checked before the strategies' own candidates; `began`: the
    time.perf_counter() that Found.after counts from (default: now)."""
    coverage = Coverage()
    found: dict[str, Found] = {}
    start, cpu = time.perf_counter(), time.process_time()
    grid.deadline = start + seconds
    stream = itertools.chain(lead, candidates(scope, seed, grid, exhaustive=exhaustive))
    limit = schedules if schedules is not None else float("inf")

    def record(strategy: str, schedule: Schedule, broken: Counter) -> None:
        number = coverage.checked
        coverage.checked += 1
        coverage.by_strategy[strategy] += 1
        if strategy == "grid":
            coverage.grid_checked += 1
        for name in broken:
            known = found.get(name)
            if known is None:
                after = time.perf_counter() - (start if began is None else began)
                found[name] = Found(name, schedule, number, strategy, after, number)
            elif schedule.size() < known.schedule.size():
                found[name] = replace(
                    known, schedule=schedule, number=number, strategy=strategy, seen=known.seen + 1
                )
            else:
                found[name] = replace(known, seen=known.seen + 1)

    def stop_reason() -> str:
        if coverage.checked >= limit:
            return "schedules"
        if set(found) >= set(scope.invariants):
            return "all found"
        if time.perf_counter() - start >= seconds:
            return "time"
        return ""

    try:
        if executor is None and workers <= 1:
            for strategy, schedule in stream:
                record(strategy, schedule, check(scope, schedule))
                if progress is not None:
                    progress()
                coverage.stopped = stop_reason()
                if coverage.stopped:
                    break
            else:
                coverage.stopped = "time" if grid.cut else "exhausted"
        else:
            coverage.stopped = _in_parallel(
                scope, grid, stream, record, stop_reason, executor, workers, limit, progress
            )
    except KeyboardInterrupt:
        coverage.stopped = "interrupted"
    coverage.seconds = time.perf_counter() - start
    coverage.grid_total, coverage.grid_levels = grid.known, len(grid.sizes)
    coverage.cpu_seconds = time.process_time() - cpu
    return found, coverage


def _in_parallel(
    scope, grid, stream, record, stop_reason, executor, workers, limit, progress
) -> str:
    """Hand out chunks, at most two per worker in flight, and record them in order."""
    from sim.sweeps import shared_pool

    pool = executor if executor is not None else shared_pool(workers)
    slots = 2 * max(workers, getattr(pool, "_max_workers", 0) or 1)
    pending: list[tuple[list, cf.Future]] = []
    handed = 0
    try:
        while True:
            while len(pending) < slots and handed < limit:
                take = int(min(CHUNK, limit - handed))
                chunk = list(itertools.islice(stream, take))
                if not chunk:
                    break
                handed += len(chunk)
                future = pool.submit(_check_chunk, scope, [s for _, s in chunk])
                pending.append((chunk, future))
            if not pending:
                return ("time" if grid.cut else "exhausted") if handed < limit else "schedules"
            chunk, future = pending.pop(0)
            for (strategy, schedule), broken in zip(chunk, future.result(), strict=True):
                record(strategy, schedule, broken)  # as this process would have, one by one
                if progress is not None:
                    progress()
                reason = stop_reason()
                if reason:
                    return reason
    finally:
        for _, future in pending:
            future.cancel()
