"""A worker's life cycle in simulated time; what it sends and records is sim.protocol's.

The worker is a SimPy process; a crash is an interrupt. Stop-the-world pauses freeze its
progress and its heartbeat (both resume when the pause ends). A rejected heartbeat tells the
worker its lease is gone; it abandons the job at its next checkpoint (or, as a zombie with
abandon_on_lost_lease off, goes on and relies on fencing). With a worker-side deadline the job's
handler runs as a process of its own: at the deadline the worker fails the job for a retry and
moves on, the handler keeping its connection and running to its end (pg-boss #555); the deadline
is a timer of the worker's own process, so a pause holds it until the pause ends. A graceful
shutdown releases the job before the worker stops (Solid Queue); a crash leaves it leased.
"""

from __future__ import annotations

import simpy

from sim.db.errors import DatabaseError
from sim.model.driver import CrashPointReached, Driver
from sim.model.session import DbSession
from sim.protocol import Lease, WorkerProtocol


class Worker:
    def __init__(self, world, index: int, *, skew: float, pauses, partitions):
        self.world = world
        self.env = world.env
        self.name = f"w{index}"
        self.policy = world.scenario.policy
        self.log = world.log
        self.pauses = pauses if pauses else None  # an OutageCalendar with outages, or None
        streams = world.streams
        latency = world.scenario.workload.statement_latency
        partitions = partitions if partitions else None
        self.db = DbSession(
            world,
            self.name,
            latency.sampler(streams.generator(f"latency/{self.name}")),
            skew=skew,
            partitions=partitions,
        )
        self.hb_db = DbSession(
            world,
            f"{self.name}/hb",
            latency.sampler(streams.generator(f"latency/{self.name}/hb")),
            skew=skew,
            partitions=partitions,
        )
        faults = world.scenario.faults
        self._phase = (
            float(streams.generator(f"worker/{index}/phase").uniform(0, self.policy.poll_interval))
            if self.policy.random_phase
            else 0.0
        )
        self._restart_delay = faults.restart_delay.sampler(
            streams.generator(f"worker/{index}/restart")
        )
        self.steps = WorkerProtocol(
            self.name,
            world.scenario,
            world.catalog,
            psp_call=world.scenario.workload.psp_call.sampler(
                streams.generator(f"worker/{index}/psp")
            ),
            hb_delay=faults.heartbeat_delay.sampler(streams.generator(f"worker/{index}/hb-delay")),
            hb_loss=streams.generator(f"worker/{index}/hb-loss"),
        )
        self.driver = Driver(world, self.pauses)
        self.up = True
        self.lease: Lease | None = None
        self.heartbeat_proc: simpy.Process | None = None
        self.handler: simpy.Process | None = None  # the job's handler, as a process (deadline)
        # handlers still running past their deadline, with the connection each runs on
        self.orphans: list[tuple[simpy.Process, Lease, DbSession]] = []
        self._sessions = 0  # connections opened for the worker after a deadline
        self.process = self.env.process(self.run())

    # ---- life cycle ---------------------------------------------------------------------------

    def run(self):
        delay = self._phase
        while True:
            try:
                yield self.env.timeout(delay)
                yield from self._serve()
            except (simpy.Interrupt, CrashPointReached) as stop:
                lease = self.lease
                graceful = (
                    isinstance(stop, simpy.Interrupt)
                    and self.world.scenario.faults.shutdown == "graceful"
                )
                self._die("shutdown" if graceful else "crash")
                if graceful and lease is not None:
                    yield from self._release(lease)
                yield self.env.timeout(self._restart_delay())
                self.db.reconnect()
                self.hb_db.reconnect()
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
        self.lease = None

    def _release(self, lease: Lease):
        """Graceful shutdown: on a fresh connection, give the job back before the process exits."""
        self.db.reconnect()
        yield from self.driver.run(self.steps.release(lease), self.db)
        self.db.crash()  # the process exits; the restart opens a new connection

    def _serve(self):
        policy, steps, driver = self.policy, self.steps, self.driver
        while True:
            lease = yield from driver.run(steps.poll(), self.db)
            if lease is None:
                continue
            self.lease = lease
            if policy.heartbeat:
                # a plain timer, not a process: most jobs end before their first heartbeat is due
                self.env.timeout(policy.heartbeat_interval).callbacks.append(
                    lambda _, lease=lease: self._start_heartbeat(lease)
                )
            if policy.deadline:
                yield from self._process_within_deadline(lease)
                continue
            yield from driver.run(steps.handle(lease), self.db)
            lease.done = True
            self.lease = None

    # ---- worker-side deadline (pg-boss's expireIn in work()) ----------------------------------

    def _process_within_deadline(self, lease: Lease):
        """Run the handler as a process; at the deadline fail the job for a retry and move on,
        leaving the handler running on its own connection (the slot is freed, the work is not)."""
        self.handler = handler = self.env.process(self._handler(lease, self.db))
        yield handler | self.env.timeout(self.policy.deadline)
        if handler.is_alive:  # the deadline's timer fired; in a pause it runs once the pause ends
            yield from self.driver.thaw()
        self.lease = self.handler = None
        if not handler.is_alive:
            return
        self.orphans.append((handler, lease, self.db))
        self._sessions += 1
        self.db = DbSession(
            self.world,
            f"{self.name}/{self._sessions}",
            self.db.latency,
            skew=self.db.skew,
            partitions=self.db.partitions,
        )
        yield from self.driver.run(self.steps.fail_at_deadline(lease), self.db)

    def _handler(self, lease: Lease, db: DbSession):
        """Process: the job's handler; a crash point in a handler past its deadline kills the worker too."""
        try:
            yield from self.driver.run(self.steps.handle(lease), db)
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

    def _heartbeat(self, lease: Lease, previous: simpy.Process | None):
        """Process: renew the lease now and every heartbeat_interval until the job is done or the lease lost."""
        interval, driver, steps = self.policy.heartbeat_interval, self.driver, self.steps
        try:
            yield from driver.thaw()
            if previous is not None and previous.is_alive:
                yield previous  # the last lease's heartbeat statement is still in flight
            while not lease.done:
                if not (yield from driver.run(steps.renew(lease), self.hb_db)):
                    return
                yield from driver.sleep(interval)
        except simpy.Interrupt:
            return
        except DatabaseError:
            return  # the connection died with the worker
