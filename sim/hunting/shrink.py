"""Shrinking a failing schedule to the shortest bad timeline, delta-debugging style (Zeller and
Hildebrandt, 2002), over the explicit schedule itself: fewer workers, fewer jobs, fewer faults,
shorter faults, earlier faults, a plain same-instant order, plain phases and work, a shorter
horizon. Each step is kept only if the same invariant still breaks and the schedule got smaller
(Schedule.size, compared in that order), and the passes repeat until none changes anything.

Why not Hypothesis's shrinker: it shrinks the choice sequence of a test it generated itself, and
its public API (hypothesis.find) cannot start from a schedule found elsewhere (the grid, PCT); its
internal Shrinker is private and changes between releases, and a shrunk result must be the same on
any machine for the same seed and commit. Here every step is a plain function of the schedule, so
the shortest schedule is a pure function of the one found.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace

from sim.hunting.space import FAULT_KINDS, KIND_RANK, Fault, Schedule, Scope

BISECTIONS = 12  # halvings of a fault's duration or start: 1/4096 of where it began


@dataclass(frozen=True)
class Step:
    """One accepted step: what it changed, and the schedule after it."""

    what: str
    schedule: Schedule


def nearest(
    scope: Scope, schedule: Schedule, breaks: Callable[[Schedule], bool], *, seconds: float
) -> Schedule:
    """The smallest schedule that breaks among `schedule`'s own configuration without faults
    and with each single fault of the grid (sim.hunting.grid: where its fault-free run shows a
    process acting), or `schedule` itself: a swarm or PCT finding often has a simpler neighbour
    (one pause where it had a stall and a crash) that bisection cannot reach."""
    from sim.hunting.grid import children

    deadline = time.perf_counter() + seconds
    best = schedule
    level = [replace(schedule, faults=())]
    for depth in range(min(len(schedule.faults), 1) + 1):
        grown: list[Schedule] = []
        for node in level:
            if time.perf_counter() > deadline:
                return best
            if node.size() < best.size() and breaks(node):
                best = node
            if depth < min(len(schedule.faults), 1):
                grown += children(scope, node)
        level = grown
    return best


def shrink(
    schedule: Schedule,
    breaks: Callable[[Schedule], bool],
    scope: Scope,
    *,
    seconds: float = 30.0,
) -> tuple[Schedule, list[Step]]:
    """The smallest schedule the passes reach from `schedule` that still `breaks`, and the steps
    taken; stops early (keeping the best so far) when `seconds` run out or on Ctrl-C."""
    deadline = time.perf_counter() + seconds
    best, steps = schedule, []
    try:
        changed = True
        while changed and time.perf_counter() < deadline:
            changed = False
            for what, candidate in _proposals(best, scope):
                if time.perf_counter() >= deadline:
                    break
                if candidate.size() < best.size() and breaks(candidate):
                    best = candidate
                    steps.append(Step(what, best))
                    changed = True
                    break  # the proposals of the smaller schedule next
    except KeyboardInterrupt:
        pass
    return best, steps


def _proposals(s: Schedule, scope: Scope) -> Iterator[tuple[str, Schedule]]:
    """Smaller schedules to try, the biggest cuts first (each a pure function of `s`)."""
    for w in reversed(range(s.workers)):
        if s.workers > 1:
            yield f"drop worker w{w}", _without_worker(s, w)
    for j in reversed(range(s.jobs)):
        if s.jobs > 1:
            work = s.work[:j] + s.work[j + 1 :]
            yield f"drop job {j + 1}", replace(s, jobs=s.jobs - 1, work=work)
    for i, fault in enumerate(s.faults):
        yield f"drop {fault.label()}", replace(s, faults=s.faults[:i] + s.faults[i + 1 :])
    for i, fault in enumerate(s.faults):
        for kind in _simpler_kinds(fault, scope):
            simpler = _as_kind(fault, kind, s.workers)
            yield f"{fault.label()} -> {simpler.label()}", _with_fault(s, i, simpler)
    if s.changes:
        yield "no priority change points", replace(s, changes=())
    if s.order:
        yield "same-instant statements in arrival order", replace(s, order=(), changes=())
    for i, fault in enumerate(s.faults):
        for value in _down(
            fault.duration, scope.epsilon, floor=scope.epsilon if fault.duration else 0.0
        ):
            yield (
                f"{fault.label()}: lasts {value:.6g} s",
                _with_fault(s, i, replace(fault, duration=value)),
            )
        for value in _down(fault.at, scope.epsilon):
            yield (
                f"{fault.label()}: strikes at {value:.6g} s",
                _with_fault(s, i, replace(fault, at=value)),
            )
        if fault.amount:
            for value in _down(abs(fault.amount), scope.epsilon):
                signed = value if fault.amount > 0 else -value
                yield (
                    f"{fault.label()}: {signed:.6g}",
                    _with_fault(s, i, replace(fault, amount=signed)),
                )
    for w in range(1, s.workers):
        if any(f.worker == w for f in s.faults):
            yield f"w{w} and w0 swap names", _swapped(s, 0, w)
    if any(s.phases):
        yield "every worker polls first at 0", replace(s, phases=(0.0,) * s.workers)
    if s.watcher_phase:
        yield "the watcher ticks first at 0", replace(s, watcher_phase=0.0)
    if s.watcher_gap is not None:
        yield "the policy's watcher gap", replace(s, watcher_gap=None)
    for j, seconds in enumerate(s.work):
        if seconds > scope.work:
            default = s.work[:j] + (scope.work,) + s.work[j + 1 :]
            yield f"job {j + 1} works {scope.work:.6g} s", replace(s, work=default)
    end = max((f.end for f in s.faults), default=0.0)
    for value in _down(s.horizon, 1.0, floor=max(end, 1.0)):
        yield f"horizon {value:.6g} s", replace(s, horizon=value)


def _down(value: float, epsilon: float, *, floor: float = 0.0) -> list[float]:
    """Smaller values to try for `value`, smallest first: the floor, then bisections toward
    `value` (a step of at least epsilon)."""
    if value - floor <= epsilon:
        return []
    out, low = [floor], floor
    for k in range(1, BISECTIONS + 1):
        candidate = value - (value - low) / 2**k
        if value - candidate < epsilon:
            break
        out.append(round(candidate, 9))
    return sorted(set(out))


def _simpler_kinds(fault: Fault, scope: Scope) -> list[str]:
    """The scope's kinds of the same shape (a window, an instant) that shrinking prefers."""
    shape = FAULT_KINDS[fault.kind][1]
    return [
        kind
        for kind in scope.kinds
        if KIND_RANK[kind] < KIND_RANK[fault.kind]
        and FAULT_KINDS[kind][1] == shape
        and not kind.startswith(("clock", "crash_after"))
    ]


def _as_kind(fault: Fault, kind: str, workers: int) -> Fault:
    """The fault as another kind, at the same time: a worker's kind strikes the fault's worker
    (worker 0 for a fault that had none)."""
    worker = fault.worker if fault.worker >= 0 else 0
    if not FAULT_KINDS[kind][0]:
        worker = -1
    amount = fault.amount if kind == "heartbeat_delay" else 0.0
    if kind == "heartbeat_delay" and not amount:
        amount = fault.duration
    return Fault(kind, min(worker, workers - 1), fault.at, fault.duration, amount)


def _with_fault(s: Schedule, i: int, fault: Fault) -> Schedule:
    faults = s.faults[:i] + (fault,) + s.faults[i + 1 :]
    return replace(s, faults=tuple(sorted(faults)))


def _swapped(s: Schedule, a: int, b: int) -> Schedule:
    """The schedule with workers `a` and `b` trading names (faults, phases, the order). Workers
    the order leaves out go in creation order (w0 first), so that order is written out, renamed:
    whoever went first at ties still does."""

    def other(k: int) -> int:
        return b if k == a else a if k == b else k

    def renamed(client: str) -> str:
        name, slash, rest = client.partition("/")
        if name.startswith("w") and name[1:].isdigit():
            return f"w{other(int(name[1:]))}{slash}{rest}"
        return client

    phases = list(s.phases)
    phases[a], phases[b] = phases[b], phases[a]
    faults = tuple(
        sorted(replace(f, worker=other(f.worker)) if f.worker >= 0 else f for f in s.faults)
    )
    listed = [*s.order, *(f"w{k}" for k in range(s.workers) if f"w{k}" not in s.order)]
    return replace(s, phases=tuple(phases), faults=faults, order=tuple(map(renamed, listed)))


def _without_worker(s: Schedule, w: int) -> Schedule:
    """The schedule without worker `w`: its faults go, later workers move down one index (their
    names too, in the order)."""

    def renamed(client: str) -> str | None:
        name, _, rest = client.partition("/")
        if not (name.startswith("w") and name[1:].isdigit()):
            return client
        k = int(name[1:])
        if k == w:
            return None
        k = k - 1 if k > w else k
        return f"w{k}" + (f"/{rest}" if rest else "")

    faults = tuple(
        replace(f, worker=f.worker - 1 if f.worker > w else f.worker)
        for f in s.faults
        if f.worker != w
    )
    order = tuple(n for n in (renamed(c) for c in s.order) if n is not None)
    return replace(
        s,
        workers=s.workers - 1,
        phases=s.phases[:w] + s.phases[w + 1 :],
        faults=faults,
        order=order,
    )
