"""One worker's statement sequences: its claim path, its handler and completion, and the upkeep of
its lease and process row, each a part of its own (sim.protocol.claims, .completion, .upkeep)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from sim.protocol.claims import Claims
from sim.protocol.completion import Completion
from sim.protocol.lease import Lease
from sim.protocol.upkeep import LeaseUpkeep, ProcessRow


class WorkerProtocol:
    """One worker's statement sequences. `catalog[job]` gives the job's spec (work, event, amount);
    psp_call, hb_delay (samplers), hb_loss and release_loss (numpy Generators; release_loss only
    with faults.release_loss > 0) are the worker's own streams (sim.protocol.streams)."""

    def __init__(
        self,
        name: str,
        scenario: Any,
        catalog: Any,
        *,
        psp_call: Callable[[], float],
        hb_delay: Callable[[], float],
        hb_loss: np.random.Generator,
        release_loss: np.random.Generator | None = None,
        lease: Callable[[int, int, float], Lease] = Lease,
        scripted_delay: Callable[[], float] | None = None,
    ):
        self.name = name
        self.policy = scenario.policy
        self.catalog = catalog
        self.claims = Claims(name, scenario.policy, lease)
        self.handling = Completion(name, scenario, catalog, psp_call)
        self.upkeep = LeaseUpkeep(
            name,
            scenario,
            hb_delay=hb_delay,
            hb_loss=hb_loss,
            release_draw=release_loss,
            scripted_delay=scripted_delay,
        )
        self.process_row = ProcessRow(name)
        # what the drivers play: each part's generators, bound once
        self.poll, self.poll_until_claimed, self.poll_batch, self.claim = (
            self.claims.poll,
            self.claims.poll_until_claimed,
            self.claims.poll_batch,
            self.claims.claim,
        )
        self.handle, self.complete = self.handling.handle, self.handling.complete
        self.renew, self.release = self.upkeep.renew, self.upkeep.release
        self.fail_at_deadline = self.upkeep.fail_at_deadline
        self.register, self.beat_process = self.process_row.register, self.process_row.beat_process

    @property
    def hb_delay(self) -> Callable[[], float]:
        """The sampler of a heartbeat's network delay (the upkeep's)."""
        return self.upkeep.hb_delay

    @hb_delay.setter
    def hb_delay(self, sampler: Callable[[], float]) -> None:
        self.upkeep.hb_delay = sampler
