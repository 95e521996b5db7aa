"""The producer: payment events arriving (batch or Poisson), some delivered twice, enqueued as
jobs."""

from __future__ import annotations

import heapq
from array import array
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Protocol

from sim.db.base import Blocked
from sim.model.pinned_draws import work as pinned_work
from sim.model.session import DbSession, SessionWorld
from sim.model.waits import Waits
from sim.payload import payload_hash, payload_json
from sim.protocol import bind_clock
from sim.scenario import Scenario
from sim.scenario.dists import Dist, blocks
from sim.support.rng import Streams


@dataclass(slots=True)
class JobSpec:
    """What the model knows of a job: its event, payload and how much work it takes. The payload
    and its hash are made when asked for (the model's hot path needs them only with dedup)."""

    id: int
    event_id: str
    amount_cents: int
    work: float

    @property
    def payload(self) -> str:
        return payload_json(self.event_id, self.amount_cents)

    @property
    def payload_hash(self) -> str:
        return payload_hash(self.payload)


class JobCatalog:
    """Per-job facts in compact arrays (job ids are 1, 2, ... in enqueue order); specs built on
    demand. Each job's event id is one string, the one the producer enqueues: the database row,
    the ledger, the dedup marker, the PSP and the log all hold that object, not copies of it."""

    def __init__(self) -> None:
        self._event: list[str] = []
        self._amount = array("q")
        self._work = array("d")

    def add(self, event_no: int, amount_cents: int, work: float) -> int:
        self._event.append(event_name(event_no))
        self._amount.append(amount_cents)
        self._work.append(work)
        return len(self._event)

    def event_id(self, job_id: int) -> str:
        return self._event[job_id - 1]

    def __len__(self) -> int:
        return len(self._event)

    def __getitem__(self, job_id: int) -> JobSpec:
        i = job_id - 1
        return JobSpec(job_id, self._event[i], self._amount[i], self._work[i])


def event_name(event_no: int) -> str:
    return f"evt-{event_no}"


def deliveries(scenario: Scenario, streams: Streams) -> Iterator[tuple[float, int, int]]:
    """(time, event number, amount) of every delivery in time order, redeliveries included."""
    w = scenario.workload
    gaps = (
        Dist.exponential(1.0 / w.rate).sampler(streams.generator("arrivals"))
        if w.arrival == "poisson"
        else None
    )
    amounts = blocks(streams.generator("amounts").integers, 100, 100_000)
    duplicates = streams.generator("redelivery")
    delay = w.redelivery_delay.sampler(streams.generator("redelivery/delay"))
    redeliveries: list[tuple[float, int, int, int]] = []  # (time, sequence, event, amount): a heap
    t = 0.0
    for event_no in range(1, w.jobs + 1):
        if gaps is not None:
            t += gaps()
        while redeliveries and redeliveries[0][0] <= t:
            due, _, again, amount = heapq.heappop(redeliveries)
            yield due, again, amount
        amount = next(amounts)
        yield t, event_no, amount
        if w.duplicate_delivery and duplicates.random() < w.duplicate_delivery:
            altered = amount + 1 if duplicates.random() < w.payload_mismatch else amount
            heapq.heappush(redeliveries, (t + delay(), event_no, event_no, altered))
    while redeliveries:
        due, _, again, amount = heapq.heappop(redeliveries)
        yield due, again, amount


class ProducerWorld(SessionWorld, Protocol):
    """What the producer reads of its run (sim.model.world.World)."""

    @property
    def streams(self) -> Streams: ...
    @property
    def catalog(self) -> JobCatalog: ...


def producer(world: ProducerWorld) -> Waits[None]:
    """Process: enqueue each delivery when it arrives; those due at t=0 go in before anything
    runs."""
    env, log, catalog = world.env, world.log, world.catalog
    latency = world.scenario.workload.statement_latency.sampler(
        world.streams.generator("latency/producer")
    )
    db = DbSession(world, "producer", latency)
    draw = world.scenario.workload.processing.sampler(world.streams.generator("processing"))
    work = pinned_work(world.scenario, draw)
    for t, event_no, amount in deliveries(world.scenario, world.streams):
        if t > env.now:
            yield env.timeout(t - env.now)
        job = catalog.add(event_no, amount, work())
        event_id = catalog.event_id(job)
        params = {"id": job, "event_id": event_id, "payload": payload_json(event_id, amount)}
        if t == 0.0:  # the initial batch: loaded at once, before the first worker polls
            bind_clock(params, 0.0 if world.db_clock is None else world.db_clock.at(0.0))
            world.backend.execute("producer", "insert_job", params)
            world.statement_counts["insert_job"] += 1
        elif db.direct and db.arrivals is None:  # as the driver plays a direct statement: inline
            yield env.timeout(latency())
            outcome = db.send("insert_job", params)
            if type(outcome) is Blocked:
                yield from db.wait(outcome, job)
        else:
            yield from db.execute("insert_job", params, job=job)
        log.add(env.now, "enqueue", "producer", job, None, event_id)
