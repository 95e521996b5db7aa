"""Independent seeded random streams, one per named source: no global random state.

Each stream is derived from (seed, name) alone, so adding a worker or a fault source never
shifts the numbers another source draws: same scenario + seed -> identical event log.
"""

from __future__ import annotations

import zlib

import numpy as np


class Streams:
    """Factory of numpy Generators keyed by a stable name such as 'worker/3/crash'."""

    def __init__(self, seed: int):
        self.seed = int(seed)

    def generator(self, name: str) -> np.random.Generator:
        key = zlib.crc32(name.encode("utf-8"))
        return np.random.default_rng(np.random.SeedSequence(self.seed, spawn_key=(key,)))
