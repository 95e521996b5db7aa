"""The rescue path as a job of the queue (policy.rescue = job): no watcher process of its own; the
watcher's tick is a task deferred every watcher_interval (from the watcher's phase) that a worker
runs between two jobs, on its own connection: procrastinate's retry_stalled_jobs as a periodic task
(#1408). Its queueing lock keeps at most one such task waiting (a period whose task still waits
defers none); it is taken ahead of the queue's other jobs (the highest priority), so it waits only
while every worker is busy or paused, and a worker that crashes while running it loses that tick.
What the tick sends is sim.protocol's (WatcherProtocol.tick)."""

from __future__ import annotations

from typing import Protocol

import simpy

from sim.model.driver import Driver
from sim.model.events import EventLog
from sim.model.pinned_draws import DrawsWorld, watcher_phase
from sim.model.session import DbSession
from sim.model.waits import Waits
from sim.protocol import WatcherProtocol


class TickRunner(Protocol):
    """What a rescue task needs of the worker that runs it (sim.model.worker.Worker)."""

    rescuing: float | None  # the due time of the rescue task it runs

    @property
    def env(self) -> simpy.Environment: ...
    @property
    def log(self) -> EventLog: ...
    @property
    def name(self) -> str: ...
    @property
    def driver(self) -> Driver: ...
    @property
    def db(self) -> DbSession: ...


class RescueJobs:
    """The rescue task waiting for a worker, by the time it was deferred (None: none waits)."""

    def __init__(self, world: DrawsWorld):
        self.world = world
        self.pending: float | None = None
        self.steps = WatcherProtocol(world.scenario.policy)

    def schedule(self) -> Waits[None]:
        """Process: defer a rescue task every watcher_interval, from a random phase, unless one
        still waits (the queueing lock)."""
        world = self.world
        env, policy = world.env, world.scenario.policy
        phase = watcher_phase(world)
        if phase:
            yield env.timeout(phase)
        while True:
            if self.pending is None:
                self.pending = env.now
            yield env.timeout(policy.watcher_interval)

    def play_tick(self, worker: TickRunner) -> Waits[None]:
        """Generator, in `worker`'s process: take the waiting rescue task and run its tick."""
        now = worker.env.now
        due, self.pending = self.pending, None
        assert due is not None  # a worker takes the task only while one waits
        worker.rescuing = due
        worker.log.add(now, "rescue_job", worker.name, None, None, now - due)
        yield from worker.driver.play(self.steps.tick(), worker.db)
        worker.rescuing = None

    def lost(self, worker: TickRunner, graceful: bool) -> None:
        """`worker` stopped while running a rescue task: a graceful stop gives it back, as it gives
        back its jobs; a crash loses it (the next period defers the next one)."""
        due, worker.rescuing = worker.rescuing, None
        if graceful:
            self.pending = due
        else:
            worker.log.add(worker.env.now, "rescue_lost", worker.name, None, None, due)
