"""The draws a scenario's explicit schedule pins (sim.scenario.pinned), for the model's processes:
each worker's and the watcher's first tick, each job's processing time, a worker's heartbeat faults.
Without a schedule each falls back to the draw it replaces, from the same stream as before."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Protocol

import simpy

from sim.protocol import streams
from sim.scenario import Scenario
from sim.support.rng import Streams


class DrawsWorld(Protocol):
    """What the draws read of a run (sim.model.world.World)."""

    @property
    def env(self) -> simpy.Environment: ...
    @property
    def scenario(self) -> Scenario: ...
    @property
    def streams(self) -> Streams: ...


def worker_phase(world: DrawsWorld, index: int) -> float:
    """When worker `index` polls first: pinned, else a random phase within a poll interval (or 0
    without policy.random_phase)."""
    pinned, policy = world.scenario.pinned, world.scenario.policy
    if pinned is not None and index < len(pinned.worker_phases):
        return pinned.worker_phases[index]
    return streams.worker_phase(policy, index, world.streams.generator)


def watcher_phase(world: DrawsWorld) -> float:
    """When the watcher (or the first rescue task) ticks first: pinned, else a random phase within
    a watcher interval (or 0 without policy.random_phase)."""
    pinned, policy = world.scenario.pinned, world.scenario.policy
    if pinned is not None and pinned.watcher_phase is not None:
        return pinned.watcher_phase
    return streams.watcher_phase(policy, world.streams.generator)


def work(scenario: Scenario, draw: Callable[[], float]) -> Callable[[], float]:
    """Each new job's processing time: the pinned ones in job order, then `draw`'s."""
    pinned = scenario.pinned
    if pinned is None or not pinned.work:
        return draw
    return itertools.chain(pinned.work, iter(draw, None)).__next__


def heartbeat_delay(world: DrawsWorld, index: int) -> Callable[[], float] | None:
    """Worker `index`'s scripted heartbeat faults as a function of the send time (now): the extra
    delay of a heartbeat sent now, inf when it is lost; None when it has none."""
    faults = [f for f in world.scenario.faults.heartbeat_faults if f.worker == index]
    if not faults:
        return None
    env = world.env
    return lambda: max(f.delay_at(env.now) for f in faults)
