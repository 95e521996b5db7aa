"""What every live process must agree on, drawn from the scenario's seeded streams as the model
does.

The job catalog (event, amount and work of each job, in enqueue order) is drawn exactly as the
model's producer draws it, so a worker process knows how long a job takes without asking anyone.
"""

from __future__ import annotations

from sim.model.producer import JobCatalog, deliveries
from sim.support.rng import Streams


def job_plan(scenario) -> tuple[list[tuple[float, int, int]], JobCatalog]:
    """(time, job id, event number) of every delivery, and the catalog of the jobs they enqueue."""
    streams = Streams(scenario.seed)
    work = scenario.workload.processing.sampler(streams.generator("processing"))
    catalog = JobCatalog()
    arrivals = []
    for t, event_no, amount in deliveries(scenario, streams):
        job = catalog.add(event_no, amount, work())
        arrivals.append((t, job, event_no))
    return arrivals, catalog


def stream_name(base: str, incarnation: int) -> str:
    """A restarted worker process draws from fresh streams (the first one from the model's
    names)."""
    return base if incarnation == 0 else f"{base}/restart-{incarnation}"
