"""The stuck watcher's life cycle in simulated time: a tick of sim.protocol every watcher_interval,
from a random phase."""

from __future__ import annotations

from sim.model.driver import Driver
from sim.model.session import DbSession
from sim.protocol import WatcherProtocol


def watcher(world):
    """Process: tick every watcher_interval from a random phase; requeue (or kill) expired
    leases."""
    policy = world.scenario.policy
    env = world.env
    latency = world.scenario.workload.statement_latency.sampler(
        world.streams.generator("latency/watcher")
    )
    db = DbSession(world, "watcher", latency)
    steps, driver = WatcherProtocol(policy), Driver(world)
    if policy.random_phase:
        yield env.timeout(
            float(world.streams.generator("watcher/phase").uniform(0, policy.watcher_interval))
        )
    while True:
        yield from driver.run(steps.tick(), db)
        yield env.timeout(policy.watcher_interval)
