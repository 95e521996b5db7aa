"""The issue 22 files, as a new user brings them: the bundled sample, and a bimodal export in
milliseconds (90% of jobs around 2 s, 10% around 40 s), our own variant of the issue's file."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest


def bimodal_ms(n: int = 2000, seed: int = 22) -> pd.DataFrame:
    """n durations in ms: 90% lognormal around 2 s, 10% around 40 s (sigma 0.3 each), with an id."""
    rng = np.random.default_rng(seed)
    slow = rng.random(n) < 0.1
    seconds = rng.lognormal(np.where(slow, np.log(40.0), np.log(2.0)), 0.3)
    return pd.DataFrame(
        {"job_id": np.arange(1, n + 1), "duration_ms": np.round(seconds * 1000).astype(int)}
    )


@pytest.fixture(scope="session")
def bimodal_csv(tmp_path_factory):
    path = tmp_path_factory.mktemp("issue22") / "bimodal.csv"
    bimodal_ms().to_csv(path, index=False)
    return path


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
