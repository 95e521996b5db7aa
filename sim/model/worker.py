"""A worker's life cycle in simulated time; what it sends and records is sim.protocol's.

The worker is a SimPy process; a crash is an interrupt. Stop-the-world pauses freeze its
progress and its heartbeat (both resume when the pause ends). A rejected heartbeat tells the
worker its lease is gone; it abandons the job at its next checkpoint (or, as a zombie with
abandon_on_lost_lease off, goes on and relies on fencing). With a worker-side deadline the job's
handler runs as a process of its own: at the deadline the worker fails the job for a retry and
moves on, the handler keeping its connection and running to its end (pg-boss #555) with its late
result dropped or completed, or stopped at once (policy.deadline_action); the deadline is a timer
of the worker's own process, so a pause holds it until the pause ends. A graceful
shutdown releases the job before the worker stops (Solid Queue); a crash leaves it leased. With
policy.rescue = job the worker also runs the watcher's tick when one is due (sim.model.rescue).
"""

from __future__ import annotations

import functools
from collections import deque
from typing import Protocol

import simpy

from sim.db.errors import DatabaseError
from sim.model import pinned_draws
from sim.model.clock import WorkerClock
from sim.model.driver import CrashPointReached, Driver, ProcessWorld
from sim.model.faults import OutageCalendar
from sim.model.liveness import ProcessLiveness
from sim.model.producer import JobCatalog
from sim.model.rescue import RescueJobs
from sim.model.session import DbSession
from sim.model.waits import Waits
from sim.protocol import Lease, WorkerProtocol
from sim.protocol.streams import worker_streams


class WorkerWorld(ProcessWorld, Protocol):
    """What a worker reads of its run (sim.model.world.World)."""

    @property
    def catalog(self) -> JobCatalog: ...
    @property
    def rescue(self) -> RescueJobs | None: ...


class Worker:
    def __init__(
        self,
        world: WorkerWorld,
        index: int,
        *,
        clock: WorkerClock | None,
        pauses: OutageCalendar | None,
        partitions: OutageCalendar | None,
    ):
        self.world = world
        self.env = world.env
        self.name = f"w{index}"
        self.policy = world.scenario.policy
        self.log = world.log
        self.pauses = pauses if pauses else None  # an OutageCalendar with outages, or None
        streams = world.streams
        latency = world.scenario.workload.statement_latency
        self.names = [self.name]  # with worker_identity = fresh, one per life: w0, w0.1, ...
        self._clock, self._partitions = clock, partitions if partitions else None
        self._latency = latency.sampler(streams.generator(f"latency/{self.name}"))
        self._hb_latency = latency.sampler(streams.generator(f"latency/{self.name}/hb"))
        self._connect()
        faults = world.scenario.faults
        self._phase = pinned_draws.worker_phase(world, index)
        self._restart_delay = faults.restart_delay.sampler(
            streams.generator(f"worker/{index}/restart")
        )
        self._protocol = functools.partial(
            WorkerProtocol,
            scenario=world.scenario,
            catalog=world.catalog,
            **worker_streams(world.scenario, index, streams.generator),
            scripted_delay=pinned_draws.heartbeat_delay(world, index),
        )
        self.steps = self._protocol(self.name)
        self.driver = Driver(world, self.pauses)
        self.liveness = ProcessLiveness(self) if self.policy.process_heartbeat_interval else None
        self.up = True
        self.lease: Lease | None = None
        self.buffer: deque[Lease] = deque()  # prefetched leases waiting their turn (prefetch > 1)
        self.rescuing: float | None = None  # the due time of the rescue task it runs (rescue = job)
        self.heartbeat_proc: simpy.Process | None = None
        self.handler: simpy.Process | None = None  # the job's handler, as a process (deadline)
        # handlers still running past their deadline, with the connection each runs on
        self.orphans: list[tuple[simpy.Process, Lease, DbSession]] = []
        self._sessions = 0  # connections opened for the worker after a deadline
        self.process = self.env.process(self.lifecycle())

    # ---- life cycle ---------------------------------------------------------------------------

    def _connect(self) -> None:
        """The connections of the worker's current life: statements, and its job heartbeat."""
        self.db = DbSession(
            self.world,
            self.name,
            self._latency,
            clock=self._clock,
            partitions=self._partitions,
        )
        self.hb_db = DbSession(
            self.world,
            f"{self.name}/hb",
            self._hb_latency,
            clock=self._clock,
            partitions=self._partitions,
        )

    def _reborn(self) -> None:
        """After a restart: the same connections (worker_identity = reused), or a new process
        under a new name, w0.1, w0.2, ... (fresh)."""
        if self.policy.worker_identity == "reused":
            self.db.reconnect()
            self.hb_db.reconnect()
            if self.liveness is not None:
                self.liveness.db.reconnect()
            return
        self.name = f"{self.names[0]}.{len(self.names)}"
        self.names.append(self.name)
        self.steps = self._protocol(self.name)
        self._connect()
        if self.liveness is not None:
            self.liveness.connect()

    def lifecycle(self) -> Waits[None]:
        """Process: poll, claim and handle jobs until the horizon; a crash interrupts it and the
        worker comes back as a new incarnation."""
        delay = self._phase
        while True:
            try:
                if self.liveness is not None:
                    yield from self.liveness.start()
                yield self.env.timeout(delay)
                yield from self._serve()
            except (simpy.Interrupt, CrashPointReached) as stop:
                held = [self.lease, *self.buffer] if self.lease else list(self.buffer)
                graceful = (
                    isinstance(stop, simpy.Interrupt)
                    and self.world.scenario.faults.shutdown == "graceful"
                )
                self._die("shutdown" if graceful else "crash")
                if graceful and held:
                    yield from self._release(held)
                yield self.env.timeout(self._restart_delay())
                self._reborn()
                self.up = True
                self.log.add(self.env.now, "restart", self.name)
                delay = 0.0

    def _die(self, kind: str = "crash") -> None:
        lease = self.lease
        self.up = False
        if lease is None:
            self.log.add(self.env.now, kind, self.name)
        else:
            self.log.add(self.env.now, kind, self.name, lease.job, lease.attempt, lease.until)
            lease.done = True
        if self.heartbeat_proc is not None and self.heartbeat_proc.is_alive:
            self.heartbeat_proc.interrupt("crash")
        if self.handler is not None and self.handler.is_alive:
            self.handler.interrupt("crash")
        self.handler = None
        for handler, orphan, db in self.orphans:  # handlers past their deadline die with it
            orphan.done = True
            if handler.is_alive:
                handler.interrupt("crash")
            db.crash()
        self.orphans.clear()
        self.db.crash()
        self.hb_db.crash()
        if self.liveness is not None:
            self.liveness.stop()
        if self.rescuing is not None:
            rescue = self.world.rescue
            assert rescue is not None  # a worker runs rescue tasks only with policy.rescue = job
            rescue.lost(self, graceful=kind == "shutdown")
        self.lease = None
        for lease in self.buffer:  # prefetched jobs go with the worker (a graceful stop too)
            lease.done = True
            self.log.add(
                self.env.now,
                "shutdown" if kind == "shutdown" else "drop",
                self.name,
                lease.job,
                lease.attempt,
                lease.until,
            )
        self.buffer.clear()

    def _release(self, leases: list[Lease]) -> Waits[None]:
        """Graceful shutdown: on a fresh connection, give the jobs back before the process exits."""
        self.db.reconnect()
        for lease in leases:
            yield from self.driver.play(self.steps.release(lease), self.db)
        self.db.crash()  # the process exits; the restart opens a new connection

    def _serve(self) -> Waits[None]:
        policy, steps, driver = self.policy, self.steps, self.driver
        # one claim per poll and nothing else to run: the hot loop, as it was before prefetch
        plain = policy.prefetch == 1 and self.world.rescue is None
        while True:
            lease: Lease | None
            if plain:  # idle polls go by inside one play
                lease = yield from driver.play(steps.poll_until_claimed(), self.db)
            else:
                lease = yield from self._next_lease()
            if lease is None:
                continue
            self.lease = lease
            if policy.heartbeat:
                # a plain timer, not a process: most jobs end before their first heartbeat is due
                # (mypy cannot infer a lambda with a default against SimPy's callback type)
                self.env.timeout(policy.heartbeat_interval).callbacks.append(
                    lambda _, lease=lease: self._start_heartbeat(lease)  # type: ignore[misc]
                )
            if policy.deadline:
                yield from self._process_within_deadline(lease)
                continue
            yield from driver.play(steps.handle(lease), self.db)
            lease.done = True
            self.lease = None

    def _next_lease(self) -> Waits[Lease | None]:
        """Generator: the next lease: a prefetched one waiting in the buffer; else, if a rescue task
        is due (rescue = job), None once the worker has run it; else one claimed now (the first of
        a batch with prefetch > 1), or None if none."""
        if self.buffer:
            return self.buffer.popleft()
        rescue = self.world.rescue
        if rescue is not None and rescue.pending is not None:
            yield from rescue.play_tick(self)
            return None
        if self.policy.prefetch == 1:
            return (yield from self.driver.play(self.steps.poll(), self.db))
        leases = yield from self.driver.play(self.steps.poll_batch(), self.db)
        if not leases:
            return None
        self.buffer.extend(leases[1:])
        return leases[0]

    # ---- worker-side deadline (pg-boss's expireIn in work()) ----------------------------------

    def _process_within_deadline(self, lease: Lease) -> Waits[None]:
        """Run the handler as a process; at the deadline fail the job for a retry and move on,
        leaving the handler running on its own connection (the slot is freed, the work is not;
        its late result dropped or completed, policy.deadline_action), or stopping it first
        (cancel: its connection closes, so its open transaction rolls back)."""
        self.handler = handler = self.env.process(self._handler(lease, self.db))
        yield handler | self.env.timeout(self.policy.deadline)
        if handler.is_alive:  # the deadline's timer fired; in a pause it runs once the pause ends
            yield from self.driver.thaw()
        self.lease = self.handler = None
        if not handler.is_alive:
            return
        lease.past_deadline = True
        if self.policy.deadline_action == "cancel":
            lease.done = True
            handler.interrupt("cancel")
            self.db.crash()
        else:
            self.orphans.append((handler, lease, self.db))
        self._sessions += 1
        self.db = DbSession(
            self.world,
            f"{self.name}/{self._sessions}",
            self.db.latency,
            clock=self.db.clock,
            partitions=self.db.partitions,
        )
        yield from self.driver.play(self.steps.fail_at_deadline(lease), self.db)

    def _handler(self, lease: Lease, db: DbSession) -> Waits[None]:
        """Process: the job's handler; a crash point in a handler past its deadline kills the
        worker too."""
        try:
            yield from self.driver.play(self.steps.handle(lease), db)
        except CrashPointReached:
            if lease is self.lease:
                raise
            if self.up:
                self.process.interrupt("crash")
        except (simpy.Interrupt, DatabaseError):
            pass  # the worker died under it
        finally:
            lease.done = True
            if any(orphan is lease for _, orphan, _ in self.orphans):  # past its deadline
                self.orphans = [entry for entry in self.orphans if entry[1] is not lease]
                db.crash()  # close its connection

    # ---- heartbeat ----------------------------------------------------------------------------

    def _start_heartbeat(self, lease: Lease) -> None:
        if not lease.done:
            self.heartbeat_proc = self.env.process(self._heartbeat(lease, self.heartbeat_proc))

    def _heartbeat(self, lease: Lease, previous: simpy.Process | None) -> Waits[None]:
        """Process: renew the lease now and every heartbeat_interval until the job is done or the
        lease lost."""
        interval, driver, steps = self.policy.heartbeat_interval, self.driver, self.steps
        try:
            yield from driver.thaw()
            if previous is not None and previous.is_alive:
                yield previous  # the last lease's heartbeat statement is still in flight
            while not lease.done:
                if not (yield from driver.play(steps.renew(lease), self.hb_db)):
                    return
                yield from driver.sleep(interval)
        except simpy.Interrupt:
            return
        except DatabaseError:
            return  # the connection died with the worker
