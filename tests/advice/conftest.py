"""The issue 22 files, as a new user brings them: the bundled sample, and a bimodal export in
milliseconds (90% of jobs around 2 s, 10% around 40 s), our own variant of the issue's file."""

from __future__ import annotations

import pytest

NO_HEARTBEAT = {
    "ttl": [60, 120, 180, 300],
    "heartbeat_interval": [None],
    "watcher_interval": [5, 30],
}


@pytest.fixture(scope="session")
def sample_advice():
    """The bundled sample at 1 job/s: TTL 3 s, heartbeat 1 s, watcher 0.5 s (advise --as tests)."""
    import sim

    return sim.advise("sample", arrival_rate=1, verify=False)


@pytest.fixture(scope="session")
def no_heartbeat_advice():
    """The same, restricted to settings without a heartbeat: TTL 300 s, watcher 5 s."""
    import sim

    return sim.advise("sample", arrival_rate=1, verify=False, candidates=NO_HEARTBEAT)
