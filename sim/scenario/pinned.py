"""The explicit schedule a scenario may carry beyond its scripted crashes, pauses and partitions:
database stalls, heartbeat faults, and the draws of a run pinned (each worker's and the watcher's
first tick, each job's processing time, the order in which statements that reach the database at
the same instant are served). `sim hunt` writes them into the scenario file it hands back, so that
`sim run FILE` replays its schedule exactly; by default a scenario has none and draws as before.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from sim.scenario import limits
from sim.scenario.fields import check_types


def _checked(obj: object, prefix: str) -> None:
    check_types(obj, prefix)


@dataclass(frozen=True)
class DbStall:
    """The database answers no one from `at` for `duration` seconds (a failover, a stalled
    checkpoint): every statement, commit or rollback sent meanwhile is served when it ends."""

    at: float
    duration: float

    def __post_init__(self) -> None:
        _checked(self, "db_stall.")


@dataclass(frozen=True)
class HeartbeatFault:
    """Worker `worker`'s job heartbeats sent in [at, at + duration) never reach the database
    (`lost = true`) or reach it `delay` seconds late."""

    worker: int
    at: float
    duration: float
    delay: float = 0.0
    lost: bool = False

    def __post_init__(self) -> None:
        _checked(self, "heartbeat_fault.")

    def delay_at(self, t: float) -> float:
        """The extra delay of a heartbeat sent at `t`: 0 outside the window, inf if lost."""
        if not self.at <= t < self.at + self.duration:
            return 0.0
        return float("inf") if self.lost else self.delay


@dataclass(frozen=True)
class Pinned:
    """What a run would otherwise draw at random, fixed: worker i polls first at worker_phases[i]
    (later workers at a random phase), the watcher ticks first at watcher_phase, job k (from 1)
    takes work[k-1] seconds of processing (later jobs draw theirs). With `order` (a list of
    clients such as "w1", "w0/hb", "watcher"; [] for arrival order), statements that reach the
    database at the same instant are served in that order, unlisted clients after in arrival
    order; at the k-th such tie for k in `order_changes`, the client served first drops to last
    (PCT's priority change points)."""

    worker_phases: tuple[float, ...] = ()
    watcher_phase: float | None = None
    work: tuple[float, ...] = ()
    order: tuple[str, ...] | None = None
    order_changes: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        _checked(self, "pinned.")


def rules(scenario: Any) -> tuple[list[tuple[bool, str, str]], dict[str, float]]:
    """(rules, time values) of the schedule's sections, for sim.scenario.settings.validate: each
    rule is (holds, key, what is allowed). `scenario`: a Scenario (settings imports this module)."""
    f, p, pinned = scenario.faults, scenario.policy, scenario.pinned
    out: list[tuple[bool, str, str]] = []
    times: dict[str, float] = {}
    workers = f"must be a worker index 0..{p.workers - 1}"
    for i, stall in enumerate(f.db_stalls):
        key = f"faults.db_stalls[{i}]"
        out += [
            (stall.at >= 0, f"{key}.at", "must be >= 0 seconds"),
            (stall.duration > 0, f"{key}.duration", "must be > 0 seconds"),
        ]
        times.update({f"{key}.at": stall.at, f"{key}.duration": stall.duration})
    for i, beat in enumerate(f.heartbeat_faults):
        key = f"faults.heartbeat_faults[{i}]"
        out += [
            (0 <= beat.worker < p.workers, f"{key}.worker", workers),
            (beat.at >= 0, f"{key}.at", "must be >= 0 seconds"),
            (beat.duration > 0, f"{key}.duration", "must be > 0 seconds"),
            (beat.delay >= 0, f"{key}.delay", "must be >= 0 seconds"),
            (
                beat.lost != (beat.delay > 0),
                key,
                "give lost = true or a delay > 0 seconds (one of the two)",
            ),
            (p.heartbeat, key, "acts on job heartbeats: set policy.heartbeat = true"),
        ]
        times.update({f"{key}.at": beat.at, f"{key}.duration": beat.duration})
        times[f"{key}.delay"] = beat.delay
    if pinned is None:
        return out, times
    for i, phase in enumerate(pinned.worker_phases):
        out.append((phase >= 0, f"pinned.worker_phases[{i}]", "must be >= 0 seconds"))
        times[f"pinned.worker_phases[{i}]"] = phase
    out.append(
        (
            len(pinned.worker_phases) <= p.workers,
            "pinned.worker_phases",
            f"has {len(pinned.worker_phases)} phases for {p.workers} workers (policy.workers)",
        )
    )
    if pinned.watcher_phase is not None:
        out.append((pinned.watcher_phase >= 0, "pinned.watcher_phase", "must be >= 0 seconds"))
        times["pinned.watcher_phase"] = pinned.watcher_phase
    for i, work in enumerate(pinned.work):
        out.append((work >= 0, f"pinned.work[{i}]", "must be >= 0 seconds"))
        times[f"pinned.work[{i}]"] = work
    out.append(
        (
            len(pinned.work) <= limits.MAX_JOBS,
            "pinned.work",
            f"holds at most {limits.MAX_JOBS:,} processing times",
        )
    )
    order = pinned.order or ()
    out += [
        (all(name for name in order), "pinned.order", "client names must not be empty"),
        (len(set(order)) == len(order), "pinned.order", "names each client once"),
        (
            pinned.order is not None or not pinned.order_changes,
            "pinned.order_changes",
            "needs pinned.order (a list of clients; [] for arrival order)",
        ),
        (
            all(1 <= k <= limits.MAX_SEED for k in pinned.order_changes),
            "pinned.order_changes",
            "must be tie numbers >= 1",
        ),
    ]
    return out, times


def recovery_deadline(stalls: Iterable[DbStall], start: float, allowance: float) -> float:
    """When `allowance` seconds of the database answering have passed since `start`: while it
    stalls nothing can recover a job, so a recovery allowance counts only the time it answers."""
    t, left = start, allowance
    for stall in sorted(stalls, key=lambda s: s.at):
        end = stall.at + stall.duration
        if end <= t:
            continue
        if stall.at >= t + left:
            break
        left -= max(0.0, stall.at - t)
        t = end
    return t + left
