"""sim.hunting's hot path: schedules checked per second per core on the memory backend.

The scope is issue 33's: the `baseline` preset, 2 workers, 2 jobs, a 60 s horizon, up to 3 faults.
The hunt's own candidates (grid, swarm and PCT, seed 0) are checked one by one in this process,
timed in CPU seconds (process time: the rate per core, whatever else the machine runs) and wall
seconds. Beside it, the path every other command takes: `sim.run` then `sim.check` of the same
schedule's scenario (validation, the whole horizon, the DataFrames), on a slice of the same
candidates; and the hot path without its early stop (the whole horizon), so that the share of the
speed-up that stopping early earns is visible. Goal (DESIGN.md): at least 1,000 schedules a second
per core. Then one search on two processes (--parallel 2) and the time each acceptance case of the
issue takes to be found (seconds into the hunt, and the schedule it was found at).

`--postgres` adds the rate on PostgreSQL with a queue's own SQL (River-like, --sql; embedded
server, or $LEASELAB_DSN) and the time River-like's overwrite takes to be found there.
Prints one JSON line (benchmarks/figures.py); --quick checks fewer schedules.
"""

from __future__ import annotations

import itertools
import os
import sys
import time
import tomllib
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from figures import emit, figure, quick

import sim
from sim.hunting.grid import Grid
from sim.hunting.runner import execute, replay
from sim.hunting.search import CHUNK, _check_chunk
from sim.hunting.space import make_scope
from sim.hunting.strategies import candidates
from sim.scenario.settings import preset

SCHEDULES = 3000
QUICK_SCHEDULES = 600
SLOW_SLICE = 150  # of the same candidates, through sim.run + sim.check
GOAL_PER_CORE = 1000.0
RIVER = Path(__file__).resolve().parents[1] / "examples/queues/river-like"


def stream(scope, n: int) -> list:
    return [s for _, s in itertools.islice(candidates(scope, 0, Grid(scope), exhaustive=False), n)]


def timed(fn, schedules) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of fn(schedule) over `schedules`."""
    cpu, wall = time.process_time(), time.perf_counter()
    for schedule in schedules:
        fn(schedule)
    return time.process_time() - cpu, time.perf_counter() - wall


def on_processes(scope, schedules, workers: int) -> float:
    """Wall seconds for a pool of `workers` processes (started beforehand) to check the
    schedules in the search's chunks."""
    with ProcessPoolExecutor(workers) as pool:
        list(pool.map(abs, range(workers)))  # the processes are up
        start = time.perf_counter()
        chunks = [schedules[i : i + CHUNK] for i in range(0, len(schedules), CHUNK)]
        for future in [pool.submit(_check_chunk, scope, chunk) for chunk in chunks]:
            future.result()
        return time.perf_counter() - start


def acceptance() -> dict:
    """Seconds into the hunt at which each acceptance case first broke (memory backend)."""
    river = tomllib.loads((RIVER / "queue.toml").read_text())["policy"]
    cases = {
        "read_then_write_double_claim": ("read-then-write-race", "double_claim", {}, {}),
        "unfenced_baseline_non_owner_completion": (
            "baseline",
            "non_owner_completion",
            {"policy.fencing": False},
            {},
        ),
        "river_like_terminal_overwritten": (
            str(RIVER / "scenario.toml"),
            "terminal_overwritten",
            {f"policy.{k}": v for k, v in river.items()},
            {"jobs": 1, "max_faults": 2},
        ),
    }
    out = {}
    for name, (scenario, invariant, overrides, scope) in cases.items():
        start = time.perf_counter()
        result = sim.hunt(
            scenario, time=60, invariant=invariant, postgres=False, **scope, **overrides
        )
        finding = result.findings.get(invariant)
        out[name] = {
            "found": finding is not None,
            "first_broke_after_seconds": round(finding.found.after, 3) if finding else None,
            "at_schedule": finding.found.first + 1 if finding else None,
            "shortest": finding.schedule.lines()[-1] if finding else None,
            "hunt_seconds_with_shrinking": round(time.perf_counter() - start, 2),
        }
    return out


def on_postgres() -> dict:
    scenario = str(RIVER / "scenario.toml")
    start = time.perf_counter()
    result = sim.hunt(
        scenario, sql=RIVER, time=60, jobs=1, max_faults=2, invariant="terminal_overwritten"
    )
    finding = result.findings.get("terminal_overwritten")
    scope = result.scope
    schedules = stream(scope, 20)
    cpu, wall = timed(lambda s: replay(scope, s), schedules)
    return {
        "river_like_found_after_seconds": round(finding.found.after, 3) if finding else None,
        "river_like_hunt_seconds": round(time.perf_counter() - start, 2),
        "sql_schedules_per_wall_second": round(len(schedules) / wall, 2),
        "sql_cpu_seconds_per_schedule_this_process": round(cpu / len(schedules), 4),
    }


def main() -> None:
    scope = make_scope(preset("baseline"), workers=2, jobs=2, max_faults=3, horizon=60.0)
    schedules = stream(scope, QUICK_SCHEDULES if quick() else SCHEDULES)
    hot_cpu, hot_wall = timed(lambda s: execute(scope, s), schedules)
    whole_cpu, _ = timed(lambda s: execute(scope, s, early=False), schedules)
    slow = schedules[:SLOW_SLICE]
    slow_cpu, _ = timed(lambda s: replay(scope, s), slow)
    quiet = [scope.default()] * SLOW_SLICE  # the "two workers, two jobs, 60 s" run
    quiet_hot, _ = timed(lambda s: execute(scope, s), quiet)
    quiet_slow, _ = timed(lambda s: replay(scope, s), quiet)
    hot_per_core = len(schedules) / hot_cpu
    pool_wall = on_processes(scope, schedules, 2)
    start = time.perf_counter()
    parallel = sim.hunt(
        "baseline", schedules=len(schedules), parallel=2, postgres=False, horizon=60.0, time=600
    )
    parallel_wall = time.perf_counter() - start
    details = {
        "scenario": "baseline",
        "scope": "2 workers, 2 jobs, 60 s, up to 3 faults; grid, swarm and PCT candidates, seed 0",
        "schedules": len(schedules),
        "schedules_per_cpu_second": round(hot_per_core),
        "schedules_per_wall_second": round(len(schedules) / hot_wall),
        "goal_per_core": GOAL_PER_CORE,
        "within_goal": hot_per_core >= GOAL_PER_CORE,
        "ms_per_schedule": {
            "hot_path": round(hot_cpu / len(schedules) * 1e3, 3),
            "hot_path_whole_horizon": round(whole_cpu / len(schedules) * 1e3, 3),
            "sim_run_and_check": round(slow_cpu / len(slow) * 1e3, 3),
        },
        "fault_free_ms": {
            "hot_path": round(quiet_hot / len(quiet) * 1e3, 3),
            "sim_run_and_check": round(quiet_slow / len(quiet) * 1e3, 3),
        },
        "speedup_over_sim_run_and_check": round(
            (slow_cpu / len(slow)) / (hot_cpu / len(schedules)), 1
        ),
        "two_processes": {
            "schedules_per_wall_second": round(len(schedules) / pool_wall),
            "speedup_over_one": round(hot_wall / pool_wall, 2),
        },
        "hunt_parallel_2": {  # sim.hunt(parallel=2): the grid grows in this process meanwhile
            "checked": parallel.coverage.checked,
            "wall_seconds_with_set_up": round(parallel_wall, 2),
            "schedules_per_wall_second": round(parallel.coverage.rate),
        },
        "cores": os.cpu_count(),
        "acceptance": acceptance(),
    }
    if "--postgres" in sys.argv:
        details["postgres"] = on_postgres()
    figures = [
        figure(
            "schedules_per_cpu_second",
            hot_per_core,
            unit="/s",
            goal=GOAL_PER_CORE,
            better="higher",
            note="2 workers, 2 jobs, 60 s, up to 3 faults; the hunt's own candidates",
        ),
        figure(
            "speedup_over_sim_run_and_check",
            (slow_cpu / len(slow)) / (hot_cpu / len(schedules)),
            unit="x",
            better="higher",
            floor="sim.run + sim.check of the same schedules, same process",
        ),
    ]
    for name, case in details["acceptance"].items():
        figures.append(
            figure(f"found_{name}", case["first_broke_after_seconds"], unit="s", goal=60.0)
        )
    emit("hunt", figures, **details)


if __name__ == "__main__":
    main()
