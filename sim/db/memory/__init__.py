"""The simulated PostgreSQL the model runs on (sim.db.memory.backend)."""

from sim.db.memory.backend import MemoryBackend

__all__ = ["MemoryBackend"]
