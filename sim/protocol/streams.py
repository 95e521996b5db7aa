"""The random sources of a worker's protocol, wired once for the model and the live mode alike:
each its own stream, named by worker (sim.support.rng), so the same seed draws the same numbers
in both."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypedDict

import numpy as np

Generators = Callable[[str], np.random.Generator]  # a stream by its name (Streams.generator)


class WorkerStreams(TypedDict):
    """WorkerProtocol's random sources, by its keyword arguments."""

    psp_call: Callable[[], float]
    hb_delay: Callable[[], float]
    hb_loss: np.random.Generator
    release_loss: np.random.Generator | None


def worker_streams(scenario: Any, index: int, stream: Generators) -> WorkerStreams:
    """WorkerProtocol's psp_call, hb_delay, hb_loss and release_loss for worker `index`, drawn from
    the streams `stream(name)` makes (a restarted live process names fresh ones)."""
    faults = scenario.faults
    return {
        "psp_call": scenario.workload.psp_call.sampler(stream(f"worker/{index}/psp")),
        "hb_delay": faults.heartbeat_delay.sampler(stream(f"worker/{index}/hb-delay")),
        "hb_loss": stream(f"worker/{index}/hb-loss"),
        "release_loss": stream(f"worker/{index}/release-loss") if faults.release_loss else None,
    }


def worker_phase(policy: Any, index: int, stream: Generators) -> float:
    """When worker `index` first polls: a random phase within a poll interval, or 0 without
    policy.random_phase."""
    if not policy.random_phase:
        return 0.0
    return float(stream(f"worker/{index}/phase").uniform(0, policy.poll_interval))


def watcher_phase(policy: Any, stream: Generators) -> float:
    """When the watcher first ticks: a random phase within a watcher interval, or 0 without
    policy.random_phase."""
    if not policy.random_phase:
        return 0.0
    return float(stream("watcher/phase").uniform(0, policy.watcher_interval))
