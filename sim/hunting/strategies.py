"""Where candidates come from, each a deterministic function of (seed, candidate number), so that
any candidate can be drawn again on any machine and the search split over processes:

- the grid (sim.hunting.grid): every schedule of the bounded exhaustive space, fewest faults first;
- swarm testing (Groce et al., ISSTA 2012): each candidate first draws which fault kinds it may
  use (each with probability 1/2), then up to max_faults faults of those kinds, at the fault-free
  run's anchors or anywhere, lasting until an anchor, a step of the policy's ladder or anything;
- PCT (Burckhardt et al., ASPLOS 2010): random priorities over the clients, so that same-instant
  statements reach the database in that order, and d - 1 priority change points among the ties the
  fault-free run met; a bug of depth d shows with probability at least 1 / (n k^(d-1)) per run.

The default search interleaves the three; --exhaustive walks the grid alone.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import lru_cache

import numpy as np

from sim.hunting.grid import Anchors, Grid, anchors
from sim.hunting.space import FAULT_KINDS, Fault, Schedule, Scope

PCT_DEPTH = 3  # bugs of depth up to 3: two priority change points
_SWARM, _PCT = 1, 2  # stream tags: each strategy draws from its own streams


class Sampler:
    """Random candidates of a scope (swarm and PCT), with the fault-free anchors of each
    configuration they use computed once."""

    def __init__(self, scope: Scope, seed: int):
        self.scope = scope
        self.seed = seed
        self._anchors = lru_cache(maxsize=None)(self._anchors_of)

    def _anchors_of(self, workers: int, jobs: int) -> Anchors:
        """The anchors of the fault-free default configuration of a size: exact for candidates
        of that configuration, a guide for the others (a random candidate need not hit them)."""
        return anchors(self.scope, self.scope.default(workers, jobs))

    def rng(self, tag: int, number: int) -> np.random.Generator:
        return np.random.default_rng([self.seed, tag, number])

    # ---- configurations ------------------------------------------------------------------------

    def config(self, rng: np.random.Generator) -> Schedule:
        """Workers, jobs, phases, work and the watcher's timing of one candidate: from a few
        patterns, so that configurations repeat and their anchors are reused."""
        s = self.scope
        p = s.base.policy
        workers = int(rng.integers(1, s.workers + 1)) if rng.random() < 0.3 else s.workers
        jobs = int(rng.integers(1, s.jobs + 1)) if rng.random() < 0.3 else s.jobs
        if rng.random() < 0.5:
            return s.default(workers, jobs)
        poll = p.poll_interval
        pattern = int(rng.integers(3))
        if pattern == 0:
            phases = (0.0,) * workers
        elif pattern == 1:
            phases = tuple(i * poll / workers for i in range(workers))
        else:
            phases = tuple(round(float(x), 3) for x in rng.uniform(0, poll, workers))
        ladder = self.work_ladder()
        work = tuple(
            s.work if rng.random() < 0.6 else float(rng.choice(ladder)) for _ in range(jobs)
        )
        watcher_phase = 0.0
        if p.watcher and rng.random() < 0.5:
            watcher_phase = round(float(rng.uniform(0, p.watcher_interval)), 3)
        gap = None
        if p.watcher_gap and rng.random() < 0.3:
            gap = float(
                rng.choice([p.watcher_gap * 10, min(p.watcher_gap * 100, p.watcher_interval / 2)])
            )
        return Schedule(workers, jobs, s.horizon, phases, watcher_phase, work, watcher_gap=gap)

    def work_ladder(self) -> list[float]:
        """Processing times worth trying: the policy's own intervals, just under and over."""
        s = self.scope
        p = s.base.policy
        eps = s.epsilon
        points = [s.work, p.lease_ttl - eps, p.lease_ttl + eps, 2 * s.work]
        if p.heartbeat:
            points += [p.heartbeat_interval + eps]
        if p.watcher:
            points += [p.lease_ttl + p.watcher_interval + eps]
        return sorted({round(x, 9) for x in points if 0 < x < s.horizon})

    def duration_ladder(self) -> list[float]:
        p = self.scope.base.policy
        eps = self.scope.epsilon
        points = [p.lease_ttl - eps, p.lease_ttl + eps, p.poll_interval + eps]
        if p.heartbeat:
            points += [p.heartbeat_interval + eps, p.lease_ttl - p.heartbeat_interval + eps]
        if p.watcher:
            points += [p.lease_ttl + p.watcher_interval + eps, p.watcher_interval + eps]
        return sorted({round(x, 9) for x in points if x > 0})

    # ---- faults --------------------------------------------------------------------------------

    def faults(self, rng: np.random.Generator, config: Schedule, where: Anchors) -> tuple:
        """Swarm: a random subset of the scope's fault kinds, then up to max_faults of them."""
        s = self.scope
        kinds = self.kinds(rng)
        if not kinds or not s.max_faults:
            return ()
        count = int(rng.integers(1, s.max_faults + 1))
        return tuple(
            sorted(self.fault(rng, str(rng.choice(kinds)), config, where) for _ in range(count))
        )

    def kinds(self, rng: np.random.Generator) -> list[str]:
        """Swarm's draw: each of the scope's fault kinds with probability 1/2."""
        return [k for k in self.scope.kinds if rng.random() < 0.5]

    def fault(self, rng, kind: str, config: Schedule, where: Anchors) -> Fault:
        s = self.scope
        horizon = config.horizon
        per_worker, lasts, _ = FAULT_KINDS[kind]
        worker = int(rng.integers(config.workers)) if per_worker else -1
        eps = s.epsilon
        points = [a.first - eps for a in where.actions] + [t + eps for _w, t in where.claims]
        points = [t for t in points if 0 < t < horizon]
        if points and rng.random() < 0.7:
            at = float(rng.choice(points))
        else:
            at = round(float(rng.uniform(0, horizon)), 3)
        p = s.base.policy
        if kind == "clock_step":
            return Fault(
                kind,
                worker,
                at,
                0.0,
                float(rng.choice([-1, 1])) * p.lease_ttl * float(rng.choice([0.5, 1.0, 2.0])),
            )
        if kind == "clock_drift":
            return Fault(
                kind, -1, 0.0, 0.0, float(rng.choice([-1, 1])) * float(rng.choice([1e3, 1e4, 9e4]))
            )
        if not lasts:
            return Fault(kind, worker, at if per_worker else 0.0)
        ends = where.ends_after(worker if worker >= 0 else None, at, eps)
        draw = rng.random()
        if ends and draw < 0.5:
            duration = float(rng.choice(ends)) - at
        elif draw < 0.8:
            duration = float(rng.choice(self.duration_ladder()))
        else:
            duration = round(float(rng.uniform(0, horizon - at)), 3)
        duration = max(min(duration, horizon - at), s.epsilon)
        amount = 0.0
        if kind == "heartbeat_delay":
            amount = float(rng.choice(self.duration_ladder()))
        return Fault(kind, worker, at, round(duration, 9), amount)

    # ---- the two random strategies ---------------------------------------------------------------

    def swarm(self, number: int) -> Schedule:
        rng = self.rng(_SWARM, number)
        config = self.config(rng)
        where = self._anchors(config.workers, config.jobs)
        return _replace(config, faults=self.faults(rng, config, where))

    def pct(self, number: int) -> Schedule:
        """Random client priorities and PCT_DEPTH - 1 change points over the fault-free run's
        ties; half of them also carry swarm faults."""
        rng = self.rng(_PCT, number)
        config = self.config(rng)
        where = self._anchors(config.workers, config.jobs)
        clients = [f"w{i}" for i in range(config.workers)]
        clients += (
            [f"w{i}/hb" for i in range(config.workers)] if self.scope.base.policy.heartbeat else []
        )
        clients.append("watcher")
        order = tuple(str(c) for c in rng.permutation(clients))
        ties = max(where.ties, 1)
        changes = tuple(sorted({int(k) for k in rng.integers(1, ties + 1, PCT_DEPTH - 1)}))
        faults = self.faults(rng, config, where) if rng.random() < 0.5 else ()
        return _replace(config, faults=faults, order=order, changes=changes)


def _replace(schedule: Schedule, **changes) -> Schedule:
    fields = {name: getattr(schedule, name) for name in Schedule.__dataclass_fields__}
    fields.update(changes)
    return Schedule(**fields)


def candidates(
    scope: Scope, seed: int, tree: Grid, *, exhaustive: bool
) -> Iterator[tuple[str, Schedule]]:
    """(strategy, schedule) in search order: the grid alone, or the grid's fault-free
    configurations first, then grid, swarm and PCT candidates in turn."""
    grid = iter(tree)
    if exhaustive:
        for schedule in grid:
            yield "grid", schedule
        return
    sampler = Sampler(scope, seed)
    number = 0
    while True:
        for _ in range(2 if number else len(tree.roots)):  # the fault-free configurations first
            step = next(grid, None)
            if step is not None:
                yield "grid", step
        yield "swarm", sampler.swarm(number)
        yield "pct", sampler.pct(number)
        number += 1
