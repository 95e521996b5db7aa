"""Small-scope runs per second: plain `sim.run` calls of 2 workers, 2 jobs, 60 simulated seconds.

What a sweep or a script of many small runs pays per run, held to issue 33's goal for schedules (at
least 1,000 a second per core on the memory backend); `sim hunt` runs its schedules on a shorter
path of its own, measured by bench_hunt.py. For each preset below, the scenario is scaled to that
scope once, then run with seeds 0, 1, 2, ... for RUNS calls of sim.run (scenario object given, as a
script would: seed and validation per call, backend, build, run, final tables, result), on one
core. The floor, measured in the same process right after: a bare SimPy loop per run (a new
Environment and two processes scheduling as many timeouts as that preset's run did), the least any
simulated run costs. Prints one JSON object (benchmarks/figures.py).

    python benchmarks/bench_schedules.py [--quick]
"""

from __future__ import annotations

import time

import simpy
from figures import emit, figure, quick

import sim
from sim.db.memory import MemoryBackend
from sim.model.world import build
from sim.scenario.settings import preset

PRESETS = ("baseline", "crash-recovery", "read-then-write-race")
SCOPE = {"policy.workers": 2, "workload.jobs": 2, "horizon": 60.0}
GOAL_PER_SECOND = 1000.0  # issue 33: schedules checked per second per core
RUNS, QUICK_RUNS = 2000, 300


def small(name: str):
    return preset(name).with_overrides(SCOPE)


def events_per_run(scenario) -> int:
    """SimPy events one run of `scenario` schedules (the floor schedules as many)."""
    world = build(scenario, MemoryBackend())
    world.env.run(until=scenario.horizon)
    return next(world.env._eid)


def model_seconds(scenario, runs: int) -> float:
    """Wall seconds of `runs` plain sim.run calls, seeds 0..runs-1."""
    start = time.perf_counter()
    for seed in range(runs):
        sim.run(scenario, backend="memory", seed=seed, progress=False)
    return time.perf_counter() - start


def bare_seconds(events: int, runs: int) -> float:
    """Wall seconds of `runs` bare SimPy runs, each two processes scheduling `events` timeouts."""
    per_process = max(events // 2, 1)

    def loop(env):
        for _ in range(per_process):
            yield env.timeout(1.0)

    start = time.perf_counter()
    for _ in range(runs):
        env = simpy.Environment()
        env.process(loop(env))
        env.process(loop(env))
        env.run()
    return time.perf_counter() - start


def main() -> None:
    runs = QUICK_RUNS if quick() else RUNS
    figures, details = [], {}
    for name in PRESETS:
        scenario = small(name)
        sim.run(scenario, backend="memory", progress=False)  # imports and caches warm
        events = events_per_run(scenario)
        wall = model_seconds(scenario, runs)
        floor = bare_seconds(events, runs)
        per_second = runs / wall
        figures.append(
            figure(
                f"{name}_runs_per_second",
                per_second,
                unit="runs/s",
                goal=GOAL_PER_SECOND,
                better="higher",
                digits=0,
            )
        )
        figures.append(
            figure(
                f"{name}_ratio_to_bare_simpy",
                wall / floor,
                unit="x",
                floor=f"bare SimPy run, {events} events",
                floor_value=floor / runs * 1e6,
                floor_unit="us/run",
                digits=2,
            )
        )
        details[name] = {
            "runs": runs,
            "ms_per_run": round(wall / runs * 1000, 3),
            "simpy_events_per_run": events,
            "bare_simpy_us_per_run": round(floor / runs * 1e6, 1),
        }
    emit("schedules", figures, scope=SCOPE, backend="memory", presets=details)


if __name__ == "__main__":
    main()
