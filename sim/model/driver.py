"""Plays the lease protocol's steps (sim.protocol) in simulated time, for one SimPy process.

A statement runs on the DbSession given (one round trip, lock waits in simulated time); work is
frozen by the worker's stop-the-world pauses and a sleep ends only once no pause holds the
process; a record goes into the run's event log at the current simulated instant.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, TypeVar

import simpy

from sim.db.base import Blocked
from sim.model.events import EventLog
from sim.model.faults import CrashPoints, OutageCalendar
from sim.model.pinned_draws import DrawsWorld
from sim.model.psp import Psp
from sim.model.session import DbSession, SessionWorld
from sim.model.waits import Waits
from sim.protocol.steps import (
    Begin,
    Charge,
    Commit,
    CrashAt,
    Delay,
    Now,
    Record,
    Rollback,
    Statement,
    Step,
    Steps,
    Wait,
    Work,
)

T = TypeVar("T")


class CrashPointReached(Exception):
    """The worker dies at a scripted point of interest (it cannot interrupt itself)."""


class DriverWorld(Protocol):
    """What a driver reads of its run (sim.model.world.World)."""

    @property
    def env(self) -> simpy.Environment: ...
    @property
    def log(self) -> EventLog: ...
    @property
    def psp(self) -> Psp: ...
    @property
    def crash_points(self) -> CrashPoints: ...


class ProcessWorld(SessionWorld, DriverWorld, DrawsWorld, Protocol):
    """What a process of the run reads of the world: for its connection, its driver, its draws."""


class Driver:
    """Runs protocol generators for one process of `world`; `pauses` is its OutageCalendar or
    None."""

    __slots__ = ("env", "log", "psp", "crash_points", "pauses")

    def __init__(self, world: DriverWorld, pauses: OutageCalendar | None = None):
        self.env = world.env
        self.log = world.log
        self.psp = world.psp
        self.crash_points = world.crash_points
        self.pauses = pauses if pauses else None

    def play(self, steps: Steps[T], db: DbSession) -> Waits[T]:
        """Generator: play `steps` with statements on session `db`; returns what they return.
        An error a step meets is thrown into the protocol at that step, as `yield from` would.
        The model's hot path: it dispatches on the step's class inline, the most frequent first
        (a table of handlers costs a call, or a generator, per step)."""
        env, add, pauses = self.env, self.log.add, self.pauses
        send, throw, execute = steps.send, steps.throw, db.execute
        # a session with nothing between its round trip and the server: its statements inline
        direct, latency, reach = db.direct, db.latency, db.send
        arrivals, client = db.arrivals, db.client
        through = arrivals.straight_through if arrivals is not None else None
        resume: Callable[[Any], Step]
        value: Any
        step: Any  # the dispatch below is on `kind`, which mypy cannot narrow `step` by
        resume, value = send, None
        while True:
            try:
                step = resume(value)
            except StopIteration as done:
                result: T = done.value
                return result
            resume, value = send, None
            kind = type(step)
            try:
                if kind is Statement:
                    if direct:
                        yield env.timeout(latency())
                        if through is not None and not through(client, step.name):
                            assert arrivals is not None  # `through` is its method
                            yield from arrivals.reach(client, step.name)
                        value = reach(step.name, step.params, step.ttl)
                        if type(value) is Blocked:
                            value = yield from db.wait(value, step.job)
                    else:
                        value = yield from execute(step.name, step.params, step.job, step.ttl)
                elif kind is Record:
                    add(env.now, step.kind, step.worker, step.job, step.attempt, step.detail)
                elif kind is Work:
                    if pauses:
                        yield env.timeout(pauses.work_end(env.now, step.seconds) - env.now)
                    else:
                        yield env.timeout(step.seconds)
                elif kind is Wait:
                    yield env.timeout(step.seconds)
                    if pauses:
                        yield from self.thaw()
                elif kind is Commit:
                    if direct:
                        yield env.timeout(latency())
                        if through is not None and not through(client, "commit"):
                            assert arrivals is not None  # `through` is its method
                            yield from arrivals.reach(client, "commit")
                        db.send_commit()
                    else:
                        yield from db.commit()
                elif kind is Begin:
                    db.begin()
                elif kind is Charge:
                    value = self.psp.charge(step.key)
                elif kind is Now:
                    value = db.now()
                elif kind is Rollback:
                    yield from db.rollback()
                elif kind is Delay:
                    yield env.timeout(step.seconds)
                elif kind is CrashAt:
                    points = self.crash_points
                    if points.configs and points.fires(step.point):
                        raise CrashPointReached(step.point)
                else:
                    raise ValueError(f"unknown protocol step {step!r}")
            except Exception as exc:  # a crash (Interrupt), a lost connection, a server error
                resume, value = throw, exc

    # ---- time, frozen by pauses ---------------------------------------------------------------

    def thaw(self) -> Waits[None]:
        """Generator: if a pause is in progress, nothing runs until it ends."""
        if self.pauses:
            end = self.pauses.end_of(self.env.now)
            if end is not None:
                yield self.env.timeout(end - self.env.now)

    def sleep(self, seconds: float) -> Waits[None]:
        """Generator: sleep `seconds`, then wait out a pause in progress."""
        yield self.env.timeout(seconds)
        if self.pauses:
            yield from self.thaw()
