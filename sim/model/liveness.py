"""Process liveness in simulated time (policy.process_heartbeat_interval > 0): a worker process
registers a row when it starts and renews that row's heartbeat every interval from a connection of
its own, whatever jobs it holds (Solid Queue, Hatchet and procrastinate track processes, not jobs).
A stop-the-world pause freezes it with the rest of the process; a partition makes it fail; a crash
ends it. What it sends is sim.protocol's (WorkerProtocol.register, beat_process)."""

from __future__ import annotations

from typing import Protocol

import simpy

from sim.db.errors import DatabaseError
from sim.model.clock import WorkerClock
from sim.model.driver import Driver, ProcessWorld
from sim.model.faults import OutageCalendar
from sim.model.session import DbSession
from sim.model.waits import Waits
from sim.protocol import WorkerProtocol
from sim.scenario import Policy


class LivenessOwner(Protocol):
    """What process liveness needs of its worker (sim.model.worker.Worker)."""

    @property
    def world(self) -> ProcessWorld: ...
    @property
    def env(self) -> simpy.Environment: ...
    @property
    def policy(self) -> Policy: ...
    @property
    def name(self) -> str: ...
    @property
    def names(self) -> list[str]: ...
    @property
    def driver(self) -> Driver: ...
    @property
    def steps(self) -> WorkerProtocol: ...
    @property
    def db(self) -> DbSession: ...
    @property
    def _clock(self) -> WorkerClock | None: ...
    @property
    def _partitions(self) -> OutageCalendar | None: ...


class ProcessLiveness:
    """One worker's process row and its heartbeat process."""

    def __init__(self, worker: LivenessOwner):
        self.worker = worker
        self.env = worker.env
        self.interval = worker.policy.process_heartbeat_interval
        self._latency = worker.world.scenario.workload.statement_latency.sampler(
            worker.world.streams.generator(f"latency/{worker.names[0]}/process")
        )
        self.process: simpy.Process | None = None
        self.connect()

    def connect(self) -> None:
        """The connection of the worker's current life (a new name gets a new one)."""
        w = self.worker
        self.db = DbSession(
            w.world, f"{w.name}/process", self._latency, clock=w._clock, partitions=w._partitions
        )

    def start(self) -> Waits[None]:
        """Generator, in the worker's process: register the row, then start the heartbeat."""
        w = self.worker
        yield from w.driver.play(w.steps.register(), w.db)
        self.process = self.env.process(self._beat())

    def stop(self) -> None:
        """The worker died: its heartbeat stops and its connection is gone."""
        if self.process is not None and self.process.is_alive:
            self.process.interrupt("crash")
        self.process = None
        self.db.crash()

    def _beat(self) -> Waits[None]:
        """Process: a heartbeat every interval, frozen by pauses, until the worker dies."""
        w = self.worker
        try:
            while True:
                yield from w.driver.sleep(self.interval)
                yield from w.driver.play(w.steps.beat_process(), self.db)
        except (simpy.Interrupt, DatabaseError):
            return
