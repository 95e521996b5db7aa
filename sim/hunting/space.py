"""The search space of a hunt: its scope (the queue's scenario made deterministic, the most
workers, jobs and faults, the fault kinds the queue can meet) and one candidate in it, an explicit
Schedule: how many workers and jobs, when each worker and the watcher first tick, how long each job
works, which faults strike whom and when, and the order of same-instant statements.

A Schedule renders into a Scenario (scripted faults and a [pinned] section, sim.scenario.pinned)
that
`sim run` replays exactly; the hunt's own runs take a fast path to the same scenario.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from sim.errors import ConfigError
from sim.scenario.dists import Dist
from sim.scenario.pinned import DbStall, HeartbeatFault, Pinned
from sim.scenario.settings import (
    INVARIANTS,
    ClockStep,
    CrashPoint,
    Scenario,
    ScriptedCrash,
    ScriptedOutage,
    from_dict,
    to_dict,
)

if TYPE_CHECKING:
    from sim.db.queue.directory import QueueDefinition

# kind -> (needs a worker, has a duration, what it does), in the order shrinking prefers them
FAULT_KINDS: dict[str, tuple[bool, bool, str]] = {
    "crash": (True, False, "the worker process dies (it restarts after faults.restart_delay)"),
    "pause": (True, True, "a stop-the-world pause freezes the worker and its heartbeat"),
    "partition": (True, True, "the worker cannot reach the database (faults.partition_mode)"),
    "db_stall": (False, True, "the database answers no one until the stall ends"),
    "heartbeat_loss": (True, True, "the worker's heartbeats in the window never arrive"),
    "heartbeat_delay": (True, True, "the worker's heartbeats in the window arrive late"),
    "clock_step": (True, False, "the worker's clock jumps (policy.clock = worker)"),
    "clock_drift": (False, False, "every worker clock runs fast or slow (policy.clock = worker)"),
    "crash_after_psp": (False, False, "the first worker back from the PSP call dies there"),
    "crash_after_marker": (False, False, "the first worker past its dedup marker dies there"),
}
# the order shrinking prefers kinds in: the faults that touch one worker first, then the ones
# that touch every process (a stall, a drift)
KIND_RANK = {
    kind: rank
    for rank, kind in enumerate(
        (
            "pause",
            "crash",
            "partition",
            "heartbeat_loss",
            "heartbeat_delay",
            "clock_step",
            "crash_after_psp",
            "crash_after_marker",
            "db_stall",
            "clock_drift",
        )
    )
}
_PINNED = Pinned(order=())
HORIZON_CAP = 600.0  # a hunt's runs are short: a lock-like TTL gives this horizon, not hours


@dataclass(frozen=True, order=True)
class Fault:
    """One fault of a schedule: `amount` is a heartbeat delay, a clock step or a drift in ppm."""

    kind: str
    worker: int = -1  # -1: not a worker's fault
    at: float = 0.0
    duration: float = 0.0
    amount: float = 0.0

    def label(self) -> str:
        """The fault in a few words: 'pause w0 31 s at 1.002 s'."""
        who = f" w{self.worker}" if self.worker >= 0 else ""
        span = f" {self.duration:.6g} s" if self.duration else ""
        if self.kind == "heartbeat_delay":
            span += f" (+{self.amount:.6g} s each)"
        elif self.kind == "clock_step":
            span = f" by {self.amount:+.6g} s"
        elif self.kind == "clock_drift":
            return f"clock drift {self.amount:+.6g} ppm"
        if self.kind.startswith("crash_after"):
            return self.kind.replace("_", " ")
        return f"{self.kind.replace('_', ' ')}{who}{span} at {self.at:.6g} s"

    @property
    def end(self) -> float:
        return self.at + self.duration


@dataclass(frozen=True)
class Schedule:
    """One candidate: a small explicit schedule (no rates, nothing left to chance)."""

    workers: int
    jobs: int
    horizon: float
    phases: tuple[float, ...]  # worker i polls first at phases[i]
    watcher_phase: float
    work: tuple[float, ...]  # job k (from 1) works work[k-1] seconds
    faults: tuple[Fault, ...] = ()
    order: tuple[str, ...] = ()  # same-instant statements: these clients first, in this order
    changes: tuple[int, ...] = ()  # PCT change points (tie numbers)
    watcher_gap: float | None = None  # the watcher's read-to-write gap; None: the policy's

    def size(self) -> tuple:
        """What shrinking makes smaller, most important first: workers, jobs, faults, the time
        faults last, how late they strike, the horizon, then the pins (order, phases, work)."""
        return (
            self.workers,
            self.jobs,
            len(self.faults),
            sum(KIND_RANK[f.kind] for f in self.faults),
            sum(f.duration + abs(f.amount) for f in self.faults),
            sum(f.at for f in self.faults),
            self.horizon,
            sum(max(f.worker, 0) for f in self.faults),  # the first workers' names, where it can
            len(self.order) + len(self.changes),
            sum(self.phases) + self.watcher_phase,
            sum(self.work),
            self.watcher_gap or 0.0,
        )

    def lines(self) -> list[str]:
        """The schedule as a few lines of text."""
        out = [
            f"{self.workers} worker(s), {self.jobs} job(s), horizon {self.horizon:g} s",
            "first polls at " + ", ".join(f"w{i} {p:.6g} s" for i, p in enumerate(self.phases)),
            f"watcher first ticks at {self.watcher_phase:.6g} s"
            + (f", writes {self.watcher_gap:.6g} s after it reads" if self.watcher_gap else ""),
            "work " + ", ".join(f"job {k} {w:.6g} s" for k, w in enumerate(self.work, 1)),
        ]
        if self.order or self.changes:
            changes = f"; change points at ties {list(self.changes)}" if self.changes else ""
            out.append(f"same-instant order {', '.join(self.order) or 'arrival'}{changes}")
        out += [f"fault: {f.label()}" for f in self.faults] or ["no fault"]
        return out


@dataclass(frozen=True)
class Scope:
    """What a hunt searches: `base` is the queue's scenario made deterministic (statement latency,
    PSP call and restart delay constant at their medians, no fault rates, no scripted faults,
    jobs enqueued at 0, statements served in a pinned order); schedules have at most `workers`
    workers, `jobs` jobs and `max_faults` faults of `kinds`, and break `invariants`."""

    base: Scenario
    workers: int
    jobs: int
    max_faults: int
    kinds: tuple[str, ...]
    invariants: tuple[str, ...]
    horizon: float
    latency: float
    epsilon: float
    work: float  # a job's processing time unless a schedule says otherwise
    sql: QueueDefinition | None = None  # a queue directory: its SQL, on PostgreSQL
    dsn: str | None = None  # the PostgreSQL server of a queue's SQL and of replays
    notes: tuple[str, ...] = field(default=())

    def lines(self) -> list[str]:
        """The scope as printed beside a certificate."""
        p = self.base.policy
        return [
            f"up to {self.workers} worker(s) and {self.jobs} job(s) (all enqueued at 0, "
            f"{self.work:.6g} s of work each), horizon {self.horizon:g} s",
            f"up to {self.max_faults} fault(s) of: {', '.join(self.kinds) or 'none'}",
            f"statement latency {self.latency * 1000:.6g} ms constant; epsilon "
            f"{self.epsilon * 1000:.6g} ms",
            f"policy: claim={p.claim}, TTL {p.lease_ttl:g} s, "
            + (f"heartbeat every {p.heartbeat_interval:g} s" if p.heartbeat else "no heartbeat")
            + ", "
            + (f"watcher every {p.watcher_interval:g} s" if p.watcher else "no watcher")
            + f", fencing={'on' if p.fencing else 'off'}",
            f"invariants: {', '.join(self.invariants)}",
            *self.notes,
        ]

    def default(self, workers: int | None = None, jobs: int | None = None) -> Schedule:
        """The fault-free schedule of the scope (all workers polling first at 0)."""
        w, j = workers or self.workers, jobs or self.jobs
        return Schedule(w, j, self.horizon, (0.0,) * w, 0.0, (self.work,) * j)

    # ---- rendering ------------------------------------------------------------------------------

    def scenario(self, schedule: Schedule) -> Scenario:
        """The schedule as a validated Scenario (what the hand-back saves and replays)."""
        return from_dict(to_dict(self.fast_scenario(schedule)))

    def fast_scenario(self, schedule: Schedule) -> Scenario:
        """The schedule as a Scenario built without re-validating the scope's base (the hunt's hot
        path: every value is in range by construction)."""
        base = self.base
        faults = schedule.faults
        of = _by_kind(faults)
        new_faults = _replace(
            base.faults,
            crashes=tuple(ScriptedCrash(f.at, f.worker) for f in of["crash"]),
            pauses=tuple(ScriptedOutage(f.worker, f.at, f.duration) for f in of["pause"]),
            partitions=tuple(ScriptedOutage(f.worker, f.at, f.duration) for f in of["partition"]),
            db_stalls=tuple(DbStall(f.at, f.duration) for f in of["db_stall"]),
            heartbeat_faults=tuple(
                HeartbeatFault(f.worker, f.at, f.duration, lost=True) for f in of["heartbeat_loss"]
            )
            + tuple(
                HeartbeatFault(f.worker, f.at, f.duration, delay=f.amount)
                for f in of["heartbeat_delay"]
            ),
            clock_steps=tuple(ClockStep(f.worker, f.at, f.amount) for f in of["clock_step"]),
            clock_drift_ppm=of["clock_drift"][-1].amount if of["clock_drift"] else 0.0,
            crash_points=tuple(
                CrashPoint(kind.removeprefix("crash_"), 1.0, 1)
                for kind in ("crash_after_psp", "crash_after_marker")
                if of[kind]
            ),
        )
        policy = _replace(base.policy, workers=schedule.workers)
        if schedule.watcher_gap is not None:
            policy = _replace(policy, watcher_gap=schedule.watcher_gap)
        pinned = _replace(
            _PINNED,
            worker_phases=schedule.phases,
            watcher_phase=schedule.watcher_phase,
            work=schedule.work,
            order=schedule.order,
            order_changes=schedule.changes,
        )
        return _replace(
            base,
            workload=_replace(base.workload, jobs=schedule.jobs),
            policy=policy,
            faults=new_faults,
            pinned=pinned,
            horizon=schedule.horizon,
        )


def _by_kind(faults) -> dict[str, list[Fault]]:
    out: dict[str, list[Fault]] = {kind: [] for kind in FAULT_KINDS}
    for fault in faults:
        out[fault.kind].append(fault)
    return out


def _replace(obj, **changes):
    """A copy of a frozen dataclass with fields changed, without its checks (values are valid by
    construction; Scope.scenario validates the result when it leaves the hunt)."""
    new = copy.copy(obj)
    for name, value in changes.items():
        object.__setattr__(new, name, value)
    return new


# ---- the scope of a queue ------------------------------------------------------------------------


def applicable_kinds(scenario: Scenario) -> tuple[str, ...]:
    """The fault kinds a queue's policy can meet: heartbeat faults need heartbeats, clock faults a
    worker clock, a crash after the dedup marker needs the marker."""
    p = scenario.policy
    kinds = ["crash", "pause", "partition", "db_stall"]
    if p.heartbeat:
        kinds += ["heartbeat_loss", "heartbeat_delay"]
    if p.clock == "worker":
        kinds += ["clock_step", "clock_drift"]
    kinds.append("crash_after_psp")
    if p.dedup:
        kinds.append("crash_after_marker")
    return tuple(kinds)


def make_scope(
    scenario: Scenario,
    *,
    workers: int = 2,
    jobs: int = 2,
    max_faults: int = 3,
    kinds=None,
    invariants=None,
    horizon: float | None = None,
    sql=None,
    dsn: str | None = None,
) -> Scope:
    """The scope of hunting `scenario` (already validated, overrides applied)."""
    for name, value, low, high in (
        ("workers", workers, 1, 8),
        ("jobs", jobs, 1, 8),
        ("max_faults", max_faults, 0, 6),
    ):
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise ConfigError(
                f"{name}: expected a whole number from {low} to {high}, got {value!r}"
            )
    allowed = applicable_kinds(scenario)
    if kinds is None:
        kinds = allowed
    else:
        kinds = tuple(kinds)
        for kind in kinds:
            if kind not in FAULT_KINDS:
                raise ConfigError(f"kinds: {kind!r} is not one of {', '.join(FAULT_KINDS)}")
            if kind not in allowed:
                raise ConfigError(
                    f"kinds: {kind} cannot act on this queue's policy (it can meet: "
                    f"{', '.join(allowed)})"
                )
    invariants = tuple(INVARIANTS) if invariants is None else tuple(invariants)
    for name in invariants:
        if name not in INVARIANTS:
            raise ConfigError(f"invariant: {name!r} is not one of {', '.join(INVARIANTS)}")
    w = scenario.workload
    latency = w.statement_latency.quantile(0.5)
    work = w.processing.quantile(0.5)
    epsilon = latency / 2 if latency > 0 else 0.001
    if horizon is None:
        horizon = min(scenario.horizon, default_horizon(scenario, work))
    base = _deterministic(scenario, workers, jobs, horizon)
    notes = []
    if _has_own_faults(scenario) or scenario.workload.arrival != "batch":
        notes.append(
            "the scenario's own fault rates, scripted faults and arrivals are replaced by each "
            "schedule's"
        )
    return Scope(
        base,
        workers,
        jobs,
        max_faults,
        tuple(kinds),
        invariants,
        float(horizon),
        latency,
        epsilon,
        work,
        sql,
        dsn,
        tuple(notes),
    )


def _has_own_faults(scenario: Scenario) -> bool:
    f = scenario.faults
    rates = (f.crash_rate, f.pause_rate, f.partition_rate, f.heartbeat_loss, f.release_loss)
    scripted = (f.crashes, f.pauses, f.partitions, f.crash_points, f.clock_steps, f.db_stalls)
    return any(rates) or any(scripted) or bool(f.heartbeat_faults) or f.clock_skew > 0


def default_horizon(scenario: Scenario, work: float) -> float:
    """Long enough for a job to be claimed, lose its lease, be recovered and be worked again: two
    jobs' work, the TTL, a watcher tick with its gap, two polls and a restart, in whole seconds."""
    p = scenario.policy
    ttl = min(p.lease_ttl, HORIZON_CAP)
    watcher = p.watcher_interval + 2 * p.watcher_gap if p.watcher else 0.0
    restart = scenario.faults.restart_delay.quantile(0.5)
    total = 2 * work + ttl + watcher + 2 * p.poll_interval + restart
    return float(min(HORIZON_CAP, math.ceil(total)))


def _deterministic(scenario: Scenario, workers: int, jobs: int, horizon: float) -> Scenario:
    """The scenario with nothing left to chance but what a schedule pins (validated once)."""
    w, f = scenario.workload, scenario.faults

    def median(dist: Dist) -> Dist:
        return Dist.constant(dist.quantile(0.5))

    data = to_dict(scenario)
    data.update(horizon=float(horizon), expect=[], record_heartbeats=True)
    data["workload"].update(
        jobs=jobs,
        arrival="batch",
        statement_latency=median(w.statement_latency).to_dict(),
        psp_call=median(w.psp_call).to_dict(),
    )
    data["policy"]["workers"] = workers
    data["faults"] = {
        **to_dict(type(f)()),
        "crash_target": "any",
        "restart_delay": median(f.restart_delay).to_dict(),
        "partition_mode": f.partition_mode,
        "shutdown": f.shutdown,
        "clock_offset": f.clock_offset,
    }
    data["pinned"] = {"order": []}
    data["workload"].pop("redelivery_delay", None)
    if w.duplicate_delivery:
        data["workload"]["redelivery_delay"] = median(w.redelivery_delay).to_dict()
    return from_dict(data)
