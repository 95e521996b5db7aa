"""The bounded exhaustive space: a finite tree of schedules grown from the scope's runs.

The roots are the configurations: every number of workers and jobs up to the scope's, the workers
polling first together (w0 first when statements tie: workers are interchangeable then) or
staggered over a poll interval (each worker first at ties in turn). A schedule's children add one
fault, placed where the schedule's own run (faults so far included) shows a process acting, no
earlier than its last fault:

- an action is a burst of statements one client sends close together (a claim's read and write,
  a completion's transaction, a heartbeat, a watcher tick that moved a job); idle polls are not;
- a crash of worker w strikes epsilon before or after one of w's statements;
- a window of worker w (a pause, a partition, lost or late heartbeats) starts epsilon before one
  of w's actions or epsilon after it claims a job, and ends epsilon after something another
  process does while the window lasts, or after a lease expires (read off a run in which the
  window never ends); a database stall starts before any worker's action and ends the same way;
- a crash point (after the PSP call, after the dedup marker) and, with worker clocks, a clock step
  of a TTL either way at one of w's statements, or a drift.

Epsilon is half a statement's latency: the policy's own time points (its TTL, heartbeat and
watcher phases) as the runs meet them, plus or minus epsilon. The tree is walked a level (a number
of faults) at a time, so a search that is cut off has checked every schedule with fewer faults.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, replace

from sim.hunting.runner import execute
from sim.hunting.space import Fault, Schedule, Scope

CLAIM_READS = frozenset(
    {"select_candidates", "claim_skip_locked", "lock_next_candidate", "claim_batch"}
)
WINDOW_KINDS = ("pause", "partition", "heartbeat_loss", "heartbeat_delay")


@dataclass(frozen=True)
class Action:
    """A burst of statements one client sent: its send instants."""

    client: str
    sends: tuple[float, ...]

    @property
    def first(self) -> float:
        return self.sends[0]

    @property
    def last(self) -> float:
        return self.sends[-1]

    @property
    def worker(self) -> int | None:
        """The worker index of the client (w0, w0/hb, w0.1 ...), or None (watcher, producer)."""
        name = self.client.split("/")[0].split(".")[0]
        return int(name[1:]) if name[:1] == "w" and name[1:].isdigit() else None


@dataclass(frozen=True)
class Anchors:
    """What a run showed: its actions, each worker's claim instants, lease expiries, ties."""

    actions: tuple[Action, ...]
    claims: tuple[tuple[int, float], ...]  # (worker, when its claim returned)
    expiries: tuple[float, ...]
    ties: int

    def ends_after(self, worker: int | None, start: float, eps: float) -> list[float]:
        """Window ends: epsilon after an action of a process other than `worker` (None: any),
        or after a lease's expiry, later than `start`."""
        ends = {a.last + eps for a in self.actions if a.worker is None or a.worker != worker}
        ends |= {t + eps for t in self.expiries}
        return sorted(round(t, 9) for t in ends if t > start)


def actions(sent, events, latency: float, gap: float) -> list[Action]:
    """The statements a run sent, grouped into actions; idle polls and watcher ticks that moved
    nothing are not actions."""
    idle = {(t, worker) for t, kind, worker, *_ in events if kind == "idle"}
    quiet_ticks = {
        t for t, kind, _w, _j, _a, moved in events if kind == "watcher_tick" and not moved
    }
    by_client: dict[str, list[float]] = {}
    for t, client, query in sent:
        if query in CLAIM_READS and (t, client) in idle:
            continue
        if client == "watcher" and t in quiet_ticks:
            continue
        by_client.setdefault(client, []).append(t - latency)
    out = []
    for client, sends in by_client.items():
        burst: list[float] = []
        for s in sorted(sends):
            if burst and s - burst[-1] > 2 * latency + gap + 1e-9:
                out.append(Action(client, tuple(burst)))
                burst = []
            burst.append(s)
        if burst:
            out.append(Action(client, tuple(burst)))
    return sorted(out, key=lambda a: (a.first, a.client))


def anchors(scope: Scope, schedule: Schedule) -> Anchors:
    """Run the schedule to its horizon and read where faults may go."""
    outcome = execute(scope, schedule, record=True)
    p = scope.base.policy
    gap = p.select_to_update_gap + (schedule.watcher_gap or p.watcher_gap)
    events = outcome.events or []
    acts = actions(outcome.sent or [], events, scope.latency, gap)
    claims = tuple((int(w[1:].split(".")[0]), t) for t, kind, w, *_ in events if kind == "claim")
    expiries = tuple(
        sorted({until for _t, kind, *_, until in events if kind in ("claim", "heartbeat")})
    )
    return Anchors(tuple(acts), claims, expiries, outcome.ties)


def _r(t: float) -> float:
    return round(t, 9)  # one instant, however it was reached


# ---- the tree ------------------------------------------------------------------------------------


def configurations(scope: Scope) -> list[Schedule]:
    """The roots: every size, two phase patterns, each tie order."""
    poll = scope.base.policy.poll_interval
    out = []
    for workers in range(1, scope.workers + 1):
        for jobs in range(1, scope.jobs + 1):
            base = scope.default(workers, jobs)
            out.append(replace(base, order=("w0",) if workers > 1 else ()))
            if workers > 1:
                phases = tuple(round(i * poll / workers, 9) for i in range(workers))
                out += [
                    replace(base, phases=phases, order=(f"w{lead}",)) for lead in range(workers)
                ]
    return out


def children(scope: Scope, node: Schedule) -> list[Schedule]:
    """The node with one more fault, anchored on the node's own run."""
    where = anchors(scope, node)
    last = max((f.at for f in node.faults), default=0.0)
    taken = set(node.faults)
    out = []
    for fault in _options(scope, node, where, last):
        if fault not in taken:
            out.append(replace(node, faults=tuple(sorted((*node.faults, fault)))))
    return out


def _options(scope: Scope, node: Schedule, where: Anchors, last: float) -> list[Fault]:
    """The faults that may follow the node's last one (at `last` or later)."""
    eps, kinds, ttl = scope.epsilon, scope.kinds, scope.base.policy.lease_ttl
    horizon = node.horizon
    out: list[Fault] = []
    for w in range(node.workers):
        own = [a for a in where.actions if a.worker == w]
        sends = sorted({_r(s + d) for a in own for s in a.sends for d in (-eps, eps)})
        sends = [t for t in sends if max(last, 0) < t < horizon or (t == last and t > 0)]
        if "crash" in kinds:
            out += [Fault("crash", w, t) for t in sends]
        starts = {_r(a.first - eps) for a in own} | {_r(t + eps) for v, t in where.claims if v == w}
        windows = [k for k in WINDOW_KINDS if k in kinds]
        for start, end in _spans(scope, node, "pause", w, _after(starts, last)) if windows else ():
            for kind in windows:
                amount = ttl if kind == "heartbeat_delay" else 0.0
                out.append(Fault(kind, w, start, _r(end - start), amount))
        if "clock_step" in kinds:
            steps = [0.0, *sends] if not last else sends
            out += [Fault("clock_step", w, t, 0.0, by) for t in steps for by in (-ttl, ttl)]
    if "db_stall" in kinds:
        starts = {_r(a.first - eps) for a in where.actions if a.worker is not None}
        spans = _spans(scope, node, "db_stall", -1, _after(starts, last))
        out += [Fault("db_stall", -1, start, _r(end - start)) for start, end in spans]
    if "clock_drift" in kinds and not any(f.kind == "clock_drift" for f in node.faults):
        drift = min(99_000.0, ttl / horizon * 1e6)
        out += [Fault("clock_drift", -1, 0.0, 0.0, d) for d in (-drift, drift)]
    for kind in ("crash_after_psp", "crash_after_marker"):
        if kind in kinds and not last:
            out.append(Fault(kind))
    return list(dict.fromkeys(out))


def _after(starts, last: float) -> list[float]:
    return sorted(t for t in starts if t > 0 and t >= last)


def _spans(scope, node, kind: str, worker: int, starts) -> list[tuple[float, float]]:
    """(start, end) of the windows from each start: the ends a run shows in which a `kind` (a
    pause of the worker, or a stall) starts there and never ends. Every window kind of a worker
    takes its ends from the open pause: one run per start, whatever the kinds."""
    out = []
    for start in starts:
        open_ended = Fault(kind, worker, start, node.horizon - start)
        seen = anchors(scope, replace(node, faults=tuple(sorted((*node.faults, open_ended)))))
        for end in seen.ends_after(worker if worker >= 0 else None, start, scope.epsilon):
            if end < node.horizon:
                out.append((start, end))
    return out


class Grid:
    """The tree walked a level at a time: every schedule with k faults before any with k + 1.
    `sizes` holds the size of each level walked in full so far (a search cut off knows those
    only)."""

    def __init__(self, scope: Scope):
        self.scope = scope
        self.roots = configurations(scope)
        self.sizes: list[int] = []
        self.deadline: float | None = None  # time.perf_counter() past which it stops growing
        self.cut = False  # it stopped growing at the deadline: the grid is not all known
        self.done = False  # the walk has ended

    def __iter__(self) -> Iterator[Schedule]:
        """Each level in turn; a level's schedules are grown parent by parent as they are handed
        out (a parent's children just before they go), so that no search waits for a whole level
        to grow."""
        yield from self.roots
        self.sizes.append(len(self.roots))
        parents = self.roots
        for _depth in range(self.scope.max_faults):
            level: list[Schedule] = []
            seen: set[tuple] = set()
            for parent in parents:
                if self.deadline is not None and time.perf_counter() > self.deadline:
                    self.cut = self.done = True
                    return
                for child in children(self.scope, parent):
                    key = (child.workers, child.jobs, child.phases, child.order, child.faults)
                    if key not in seen:
                        seen.add(key)
                        level.append(child)
                        yield child
            self.sizes.append(len(level))
            parents = level
        self.done = True

    @property
    def known(self) -> int:
        """The schedules of the levels grown so far."""
        return sum(self.sizes)

    def lines(self) -> list[str]:
        levels = ", ".join(f"{n:,} with {k} fault(s)" for k, n in enumerate(self.sizes))
        return [f"{len(self.roots)} configurations; schedules: {levels}"]
