"""The bounded exhaustive space: a finite grid of schedules read off the fault-free runs of the
scope, and the instants (anchors) faults are placed at.

For each configuration (workers <= W, jobs <= J, workers polling first together or staggered, and
which worker goes first when statements tie) the fault-free run says when each process acts: a
worker claims, renews, completes; the watcher ticks. An action is a burst of statements one client
sends close together (a claim's read and write, a completion's transaction). A fault starts just
before an action (epsilon before its first statement) and, if it lasts, ends just after an action
of another process or just after a lease's expiry; a crash also strikes just after each statement.
Those are the policy's own time points (its TTL, heartbeat and watcher phases) as the run meets
them, plus or minus epsilon (half a statement's latency). Every combination of up to `max_faults`
such faults is one schedule of the grid.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator
from dataclasses import dataclass

from sim.hunt.runner import execute
from sim.hunt.space import Fault, Schedule, Scope

CLAIM_READS = frozenset({"select_candidates", "claim_skip_locked", "lock_next_candidate", "claim_batch"})
WINDOW_KINDS = ("pause", "partition", "heartbeat_loss", "heartbeat_delay")  # and db_stall


@dataclass(frozen=True)
class Action:
    """A burst of statements one client sent: when it sent the first and the last of them."""

    client: str
    first: float
    last: float
    sends: tuple[float, ...]


@dataclass(frozen=True)
class Anchors:
    """Where a configuration's faults go: starts (epsilon before an action: (acting client,
    instant)), crash instants (also epsilon after each statement), and ends ((client, instant):
    epsilon after an action, client '' for a lease's expiry)."""

    starts: tuple[tuple[str, float], ...]
    crashes: tuple[float, ...]
    ends: tuple[tuple[str, float], ...]
    ties: int

    def ends_after(self, worker: int | None, start: float) -> list[float]:
        """Window ends after `start`: just after an action of a process other than worker
        `worker` (None: any), or just after a lease's expiry."""
        own = f"w{worker}" if worker is not None else None
        return sorted(
            {t for who, t in self.ends if t > start and (not who or who.split("/")[0] != own)}
        )


def actions(sent, events, latency: float, gap: float) -> list[Action]:
    """The statements a run sent, grouped into actions; idle polls (a claim that found nothing)
    are not actions."""
    idle = {(t, worker) for t, kind, worker, *_ in events if kind == "idle"}
    by_client: dict[str, list[float]] = {}
    for t, client, query in sent:
        if query in CLAIM_READS and (t, client) in idle:
            continue
        by_client.setdefault(client, []).append(t - latency)
    out = []
    for client, sends in by_client.items():
        burst: list[float] = []
        for s in sorted(sends):
            if burst and s - burst[-1] > 2 * latency + gap + 1e-9:
                out.append(Action(client, burst[0], burst[-1], tuple(burst)))
                burst = []
            burst.append(s)
        if burst:
            out.append(Action(client, burst[0], burst[-1], tuple(burst)))
    return sorted(out, key=lambda a: (a.first, a.client))


def anchors(scope: Scope, schedule: Schedule) -> Anchors:
    """Run the schedule to its horizon and read its anchors."""
    outcome = execute(scope, schedule, record=True)
    p = scope.base.policy
    eps, horizon = scope.epsilon, schedule.horizon
    gap = p.select_to_update_gap + (schedule.watcher_gap or p.watcher_gap)
    acts = actions(outcome.sent or [], outcome.events or [], scope.latency, gap)
    starts = sorted({(a.client, _r(a.first - eps)) for a in acts if a.first - eps > 0})
    crashes = sorted(
        {_r(s + d) for a in acts for s in a.sends for d in (-eps, eps) if 0 < s + d < horizon}
    )
    ends = {(a.client, _r(a.last + eps)) for a in acts}
    for _t, kind, _worker, _job, _attempt, until in outcome.events or []:
        if kind in ("claim", "heartbeat") and isinstance(until, float):
            ends.add(("", _r(until + eps)))
    ends = {(who, t) for who, t in ends if t < horizon}
    return Anchors(tuple(starts), tuple(crashes), tuple(sorted(ends)), outcome.ties)


def _r(t: float) -> float:
    return round(t, 9)  # one instant, however it was reached


# ---- the configurations and their single faults -----------------------------------------------


def configurations(scope: Scope) -> Iterator[Schedule]:
    """The fault-free schedules of the grid: every size, two phase patterns, each tie order.
    Workers that poll together are interchangeable, so there only w0 goes first at ties."""
    poll = scope.base.policy.poll_interval
    for workers in range(1, scope.workers + 1):
        for jobs in range(1, scope.jobs + 1):
            base = scope.default(workers, jobs)
            patterns = [("together", base.phases)]
            if workers > 1:
                patterns.append(("staggered", tuple(i * poll / workers for i in range(workers))))
            for name, phases in patterns:
                leads = range(workers) if name == "staggered" else range(1)
                for lead in leads:
                    order = (f"w{lead}",) if workers > 1 else ()
                    yield Schedule(
                        workers, jobs, base.horizon, phases, 0.0, base.work, order=order
                    )


def single_faults(scope: Scope, schedule: Schedule, where: Anchors) -> list[Fault]:
    """Every fault of the grid for one configuration, in a fixed order. A window (a pause, a
    partition, a stall, heartbeat trouble) that starts at an anchor ends just after something
    another process does while it lasts, or just after a lease expires: those are read off a run
    in which the window never ends."""
    p = scope.base.policy
    ttl = p.lease_ttl
    workers = range(schedule.workers)
    out: list[Fault] = []
    kinds = scope.kinds
    if "crash" in kinds:
        out += [Fault("crash", w, t) for w in workers for t in where.crashes]
    starts = sorted({t for _client, t in where.starts})
    for kind in (*WINDOW_KINDS, "db_stall"):
        if kind not in kinds:
            continue
        amount = ttl if kind == "heartbeat_delay" else 0.0
        for w in workers if kind != "db_stall" else (-1,):
            for start in starts:
                open_ended = Fault(kind, w, start, schedule.horizon - start, amount)
                seen = anchors(scope, _with_faults(schedule, (open_ended,)))
                for end in seen.ends_after(w if w >= 0 else None, start):
                    out.append(Fault(kind, w, start, _r(end - start), amount))
    if "clock_step" in kinds:
        for w in workers:
            for by in (-ttl, ttl):
                out += [Fault("clock_step", w, t, 0.0, by) for t in (0.0, *where.crashes)]
    if "clock_drift" in kinds:
        drift = min(99_000.0, ttl / schedule.horizon * 1e6)
        out += [Fault("clock_drift", -1, 0.0, 0.0, d) for d in (-drift, drift)]
    for kind in ("crash_after_psp", "crash_after_marker"):
        if kind in kinds:
            out.append(Fault(kind))
    return list(dict.fromkeys(out))


@dataclass
class GridPart:
    """One configuration of the grid with its single faults."""

    config: Schedule
    faults: list[Fault]

    def count(self, max_faults: int) -> int:
        return sum(math.comb(len(self.faults), k) for k in range(max_faults + 1))


def grid(scope: Scope) -> list[GridPart]:
    """The grid's configurations with their faults (one fault-free run each)."""
    parts = []
    for config in configurations(scope):
        where = anchors(scope, config)
        parts.append(GridPart(config, single_faults(scope, config, where)))
    return parts


def enumerate_grid(parts: list[GridPart], max_faults: int) -> Iterator[Schedule]:
    """Every schedule of the grid: fewest faults first, then configuration by configuration."""
    for k in range(max_faults + 1):
        for part in parts:
            for combo in itertools.combinations(part.faults, k):
                yield _with_faults(part.config, combo)


def _with_faults(config: Schedule, faults) -> Schedule:
    return Schedule(
        config.workers,
        config.jobs,
        config.horizon,
        config.phases,
        config.watcher_phase,
        config.work,
        tuple(faults),
        config.order,
        config.changes,
        config.watcher_gap,
    )
