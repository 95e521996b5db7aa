"""The producer: the arrival schedule of payment events (with redeliveries) and their enqueueing."""

from __future__ import annotations

import hashlib
import json
from typing import NamedTuple

from sim.model.events import Event
from sim.model.session import DbSession


class JobSpec(NamedTuple):
    """What the model knows of a job: its event, payload and how much work it takes."""

    id: int
    event_id: str
    payload: str
    payload_hash: str
    amount_cents: int
    work: float
    redelivery: bool


def arrival_schedule(scenario, streams) -> list[tuple[float, JobSpec]]:
    """(enqueue time, job) for every delivery, in enqueue order; job ids follow that order."""
    w = scenario.workload
    arrivals = streams.generator("arrivals")
    amounts = streams.generator("amounts")
    duplicates = streams.generator("redelivery")
    work = w.processing.sampler(streams.generator("processing"))
    redelivery_delay = w.redelivery_delay.sampler(streams.generator("redelivery/delay"))
    items = []
    t = 0.0
    for k in range(1, w.jobs + 1):
        if w.arrival == "poisson":
            t += float(arrivals.exponential(1.0 / w.rate))
        amount = int(amounts.integers(100, 100_000))
        items.append((t, len(items), f"evt-{k}", amount, False))
        if w.duplicate_delivery and duplicates.random() < w.duplicate_delivery:
            mismatch = duplicates.random() < w.payload_mismatch
            items.append((t + redelivery_delay(), len(items), f"evt-{k}", amount + (1 if mismatch else 0), True))
    items.sort()
    schedule = []
    for job_id, (t, _, event_id, amount, redelivery) in enumerate(items, start=1):
        payload = json.dumps({"event_id": event_id, "amount_cents": amount, "currency": "EUR"}, separators=(",", ":"))
        digest = hashlib.sha256(payload.encode()).hexdigest()[:16]
        schedule.append((t, JobSpec(job_id, event_id, payload, digest, amount, work(), redelivery)))
    return schedule


def producer(world, schedule):
    """Process: enqueue each job at its time; jobs due at t=0 are inserted before anything runs."""
    log = world.log
    latency = world.scenario.workload.statement_latency.sampler(world.streams.generator("latency/producer"))
    db = DbSession(world, "producer", latency)
    later = []
    for t, spec in schedule:
        world.catalog[spec.id] = spec
        if t == 0.0:
            world.backend.execute("producer", "insert_job",
                                  {"id": spec.id, "event_id": spec.event_id, "payload": spec.payload, "now": 0.0})
            world.statement_counts["insert_job"] += 1
            log.append(Event(0.0, "enqueue", "producer", spec.id, None, spec.event_id))
        else:
            later.append((t, spec))
    return _enqueue_later(world, db, later)


def _enqueue_later(world, db, later):
    env, log = world.env, world.log
    for t, spec in later:
        if t > env.now:
            yield env.timeout(t - env.now)
        yield from db.run("insert_job", {"id": spec.id, "event_id": spec.event_id, "payload": spec.payload}, job=spec.id)
        log.append(Event(env.now, "enqueue", "producer", spec.id, None, spec.event_id))
