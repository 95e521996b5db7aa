"""A live worker process's life cycle; what it sends and records is sim.protocol's, as the model's.

It claims and handles jobs on one connection and renews its lease on a thread of its own with
another, with real sleeps on the shared clock. Faults come from outside: the runner SIGKILLs it
(crash), SIGSTOPs and SIGCONTs it (a stop-the-world pause: the heartbeat thread stops too), and
writes a partition's end into its slot (its connections drop). Heartbeat loss and delay it draws
itself, from the model's streams.
"""

from __future__ import annotations

import os
import threading

from sim.db.errors import StatementError
from sim.live.connection import LiveConnection
from sim.live.driver import LiveDriver
from sim.live.plan import job_plan, stream_name
from sim.protocol import Lease, WorkerProtocol
from sim.rng import Streams


class LiveLease(Lease):
    """A lease whose holder the runner sees in the shared slots, and whose end wakes the
    heartbeat thread at once."""

    __slots__ = ("finished", "slots", "index")

    def __init__(self, job: int, attempt: int, until: float, slots, index: int):
        super().__init__(job, attempt, until)
        self.finished = threading.Event()
        self.slots, self.index = slots, index

    def finish(self) -> None:
        super().finish()
        self.finished.set()

    def extend(self, until: float) -> None:
        super().extend(until)
        self.slots.renew(self.index, self.job, until)


class LiveWorker:
    def __init__(self, scenario, index: int, *, slots, dsn, schema, queries, clock, recorder):
        self.scenario, self.policy = scenario, scenario.policy
        self.index = index
        self.name = f"w{index}"
        self.clock, self.recorder, self.slots = clock, recorder, slots
        _, self.catalog = job_plan(scenario)
        partition = {
            "slots": slots,
            "index": index,
            "partition_mode": scenario.faults.partition_mode,
        }
        self.db = LiveConnection(dsn, schema, self.name, queries, clock, recorder, **partition)
        self.hb_db = LiveConnection(
            dsn, schema, f"{self.name}/hb", queries, clock, recorder, **partition
        )
        self.driver = LiveDriver(
            clock, recorder, os.path.join(os.path.dirname(recorder.path), "psp-keys")
        )

    def _streams(self, incarnation: int) -> None:
        """This process's random sources: the model's streams for the first process, fresh ones after a restart."""
        streams = Streams(self.scenario.seed)

        def stream(base: str):
            return streams.generator(stream_name(base, incarnation))

        i, faults = self.index, self.scenario.faults
        self.phase = (
            float(stream(f"worker/{i}/phase").uniform(0, self.policy.poll_interval))
            if self.policy.random_phase and incarnation == 0
            else 0.0
        )
        self.steps = WorkerProtocol(
            self.name,
            self.scenario,
            self.catalog,
            psp_call=self.scenario.workload.psp_call.sampler(stream(f"worker/{i}/psp")),
            hb_delay=faults.heartbeat_delay.sampler(stream(f"worker/{i}/hb-delay")),
            hb_loss=stream(f"worker/{i}/hb-loss"),
            lease=lambda job, attempt, until: LiveLease(job, attempt, until, self.slots, i),
        )

    def prepare(self) -> None:
        self.db.open()
        self.hb_db.open()

    # ---- life cycle ---------------------------------------------------------------------------

    def run(self, incarnation: int = 0, start_at: float = 0.0) -> None:
        self._streams(incarnation)
        clock, steps, driver = self.clock, self.steps, self.driver
        if incarnation:
            clock.sleep_until(start_at)
            self.recorder.add(clock.now(), "restart", self.name)
        clock.sleep(self.phase)
        while True:
            lease = driver.run(steps.poll(), self.db)
            if lease is None:
                continue
            # recorded by the protocol first, then told to the runner: a worker the runner sees
            # holding a job has its claim on record
            self.slots.hold(self.index, lease.job, lease.attempt, lease.until)
            if self.policy.heartbeat:
                threading.Thread(target=self._heartbeat, args=(lease,), daemon=True).start()
            driver.run(steps.handle(lease), self.db)
            lease.finish()
            self.slots.release(self.index)

    def _heartbeat(self, lease: LiveLease) -> None:
        """Thread: renew the lease every heartbeat_interval until the job is done or the lease lost."""
        wait = self.clock.wall(self.policy.heartbeat_interval)
        while not lease.finished.wait(wait):
            try:
                if not self.driver.run(self.steps.renew(lease), self.hb_db):
                    return
            except StatementError:
                continue  # the server refused this beat: try again at the next
