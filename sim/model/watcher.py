"""The stuck watcher's life cycle in simulated time: a tick of sim.protocol every watcher_interval,
from a random phase."""

from __future__ import annotations

from sim.model.driver import Driver, ProcessWorld
from sim.model.pinned_draws import watcher_phase
from sim.model.session import DbSession
from sim.model.waits import Waits
from sim.protocol import WatcherProtocol


def watcher(world: ProcessWorld) -> Waits[None]:
    """Process: tick every watcher_interval from a random phase; requeue (or kill) expired
    leases."""
    policy = world.scenario.policy
    env = world.env
    latency = world.scenario.workload.statement_latency.sampler(
        world.streams.generator("latency/watcher")
    )
    db = DbSession(world, "watcher", latency)
    steps, driver = WatcherProtocol(policy), Driver(world)
    phase = watcher_phase(world)
    if phase:
        yield env.timeout(phase)
    while True:
        yield from driver.play(steps.tick(), db)
        yield env.timeout(policy.watcher_interval)
