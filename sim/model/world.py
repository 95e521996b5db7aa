"""Assemble one simulation (environment, backend, streams, processes) and run it to the horizon."""

from __future__ import annotations

import time
from collections import defaultdict

import simpy

from sim.db.base import Backend
from sim.model.arrivals import Arrivals
from sim.model.clock import db_clock, worker_clock
from sim.model.events import EventLog
from sim.model.faults import (
    CrashPoints,
    crash_holders,
    crash_owner,
    holder_crash_times,
    inject_crashes,
    log_db_clock_steps,
    log_outages,
    worker_crash_times,
    worker_outages,
)
from sim.model.producer import JobCatalog, producer
from sim.model.psp import Psp
from sim.model.rescue import RescueJobs
from sim.model.session import TxRegistry
from sim.model.watcher import watcher
from sim.model.worker import Worker
from sim.scenario import Scenario
from sim.support.progress import Progress
from sim.support.rng import Streams


class World:
    """Everything one run shares: clock, database, log, PSP, the job catalog."""

    def __init__(self, scenario: Scenario, backend: Backend):
        self.scenario = scenario
        self.backend = backend
        self.env = simpy.Environment()
        self.db_clock = db_clock(scenario)  # None: the database reads true time
        self.streams = Streams(scenario.seed)
        self.log = EventLog()
        self.statement_counts: defaultdict[str, int] = defaultdict(int)  # Counter's += costs 2x
        self.tx = TxRegistry(self.env)
        self.arrivals = Arrivals.of(self.env, scenario)  # None unless stalls or an order are set
        self.psp = Psp()
        self.catalog = JobCatalog()
        self.crash_points = CrashPoints(
            scenario.faults.crash_points, self.streams.generator("crash-points")
        )
        self.workers: list[Worker] = []
        self.producer: simpy.Process | None = None
        # policy.rescue = job: the rescue tasks the workers run (the watcher is no process then)
        self.rescue = RescueJobs(self) if scenario.policy.rescue == "job" else None


def build(scenario: Scenario, backend: Backend) -> World:
    """Create the world and start every process (producer, workers, faults, watcher)."""
    world = World(scenario, backend)
    env, policy, faults, horizon = world.env, scenario.policy, scenario.faults, scenario.horizon
    world.producer = env.process(producer(world))
    if world.db_clock is not None:
        env.process(log_db_clock_steps(env, world.log, faults.db_clock_steps))
    for i in range(policy.workers):
        streams = world.streams
        clock = worker_clock(scenario, i, streams)
        pauses, partitions = worker_outages(faults, i, streams, horizon)
        worker = Worker(world, i, clock=clock, pauses=pauses, partitions=partitions)
        world.workers.append(worker)
        crash_times = worker_crash_times(faults, i, streams, horizon)
        if crash_times:
            env.process(inject_crashes(env, worker, crash_times))
        if pauses:
            env.process(log_outages(env, world.log, worker.name, pauses, "pause"))
        if partitions:
            env.process(log_outages(env, world.log, worker.name, partitions, "partition"))
    holder_times = holder_crash_times(
        faults, policy.workers, world.streams, horizon
    )  # [] unless crash_target = "holder"
    if holder_times:
        env.process(
            crash_holders(
                env, world.workers, holder_times, world.streams.generator("crashes/holder-pick")
            )
        )
    for crash in faults.crashes:
        if crash.job is not None:
            env.process(crash_owner(env, world.workers, crash.job, crash.at))
    if world.rescue is not None:
        env.process(world.rescue.schedule())
    elif policy.watcher:
        env.process(watcher(world))
    return world


def run_to_horizon(world: World, progress: bool | None = None) -> float:
    """Run the environment to the horizon; a progress bar appears for runs over ~2 wall seconds
    (sim.support.progress: never in batch output). With no bar it is one call: the hundred slices
    a bar moves by cost a small run a fifth of its time (the run is the same either way)."""
    horizon = world.scenario.horizon
    start = time.perf_counter()
    slices = 100
    bar = Progress(slices, progress, world.scenario.name, unit="%")
    try:
        if bar.mode is False:
            world.env.run(until=horizon)
        else:
            for i in range(1, slices + 1):
                world.env.run(until=horizon * i / slices)
                bar.tick(1)
    finally:
        bar.close()
    if not world.scenario.record_heartbeats:
        log_leases_held(world)
    return time.perf_counter() - start


def log_leases_held(world: World) -> None:
    """At the horizon of a run without routine heartbeat records, each lease a worker still holds,
    with its last renewal's lease_until (without it the lease would read as lapsed at the claim's).
    """
    now = world.env.now
    for worker in world.workers:
        lease = worker.lease
        if lease is not None:
            world.log.add(now, "lease_held", worker.name, lease.job, lease.attempt, lease.until)
