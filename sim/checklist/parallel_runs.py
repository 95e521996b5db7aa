"""The review's runs of a queue's SQL, on the two cores: each run is one process driving the server
statement by statement, so independent runs (seeds, variants) go to a process pool (the one
sim.sweeps keeps) and come back as Run objects, in order. Runs on the memory backend are short and
stay in this process."""

from __future__ import annotations

from sim.runner import run
from sim.scenario.settings import Scenario


def run_all(scenarios: list[Scenario], on: dict) -> list:
    """sim.run of each scenario (its own seed), with `on` (sql= and dsn=: the user's queue on
    PostgreSQL); the same runs, in the same order, whether or not they ran side by side."""
    from sim.sweeps import cpu_count, shared_pool

    workers = min(2, cpu_count(), len(scenarios))
    if not on or workers < 2:
        return [run(s, seed=s.seed, **on) for s in scenarios]
    pool = shared_pool(workers)
    futures = [pool.submit(_one_run, s, on) for s in scenarios]
    return [f.result() for f in futures]


def _one_run(scenario: Scenario, on: dict):
    return run(scenario, seed=scenario.seed, **on)
