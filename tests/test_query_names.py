"""The memory backend implements exactly one method per named query, with the same name."""

from __future__ import annotations

from sim.db.base import Backend
from sim.db.memory import MemoryBackend
from sim.db.queries import load_queries


def test_memory_methods_are_the_named_queries():
    protocol = {name for name, value in vars(Backend).items() if callable(value) and not name.startswith("_")}
    methods = {
        name for name in dir(MemoryBackend)
        if not name.startswith("_") and callable(getattr(MemoryBackend, name))
    }
    assert protocol == {"connect", "execute", "resume", "begin", "commit", "rollback", "crash",
                        "in_transaction", "close"}
    assert methods - protocol == set(load_queries())
