"""sim.sweeps's parallel speedup: 12 watcher intervals x 100 replications of `crash-recovery`.

The same 1200-run sweep runs serially (in this process) and on the default process pool over
every core (a fresh pool each time: start-up included), alternately, ROUNDS times; the best wall
time of each is kept (the usual defence against other load on the machine), and the runs tables
must be identical. CPU seconds are reported beside wall seconds: serial CPU / wall well below 1,
or pool CPU / (wall x cores) well below 1, means other processes were competing for the cores.

The preset is scaled down so that the benchmark takes a few minutes: horizon 3600 -> 900 s and
workload.jobs 600 -> 150 (its Poisson stream of 0.15 jobs/s brings ~135 jobs in 900 s, so the cap
hardly binds; crashes stay at 6 per worker-hour). Budget: speedup >= 0.8 x cores (1.6 on 2 cores).
--quick: 25 replications, one round. Prints one JSON object (benchmarks/figures.py).
"""

from __future__ import annotations

import os
import resource
import sys
import time

import pandas as pd
from figures import emit, figure, quick

from sim.scenario.settings import preset
from sim.sweeps import cpu_count, shutdown_pools, sweep

WATCHER_INTERVALS = [2, 5, 10, 15, 20, 30, 45, 60, 90, 120, 180, 300]
REPLICATIONS, QUICK_REPLICATIONS = 100, 25
ROUNDS, QUICK_ROUNDS = 2, 1
SCALED = {"horizon": 900.0, "workload.jobs": 150}
TARGET_PER_CORE = 0.8  # 1.6 on 2 cores


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def serial_round(scenario, grid, replications: int):
    wall, cpu = time.perf_counter(), time.process_time()
    result = sweep(scenario, grid, replications, seed=0, executor="serial", progress=False)
    return result, time.perf_counter() - wall, time.process_time() - cpu


def pool_round(scenario, grid, replications: int):
    shutdown_pools()  # a fresh default pool: its start-up is part of the time
    cpu = _children_cpu()
    wall = time.perf_counter()
    result = sweep(scenario, grid, replications, seed=0, progress=False)
    wall = time.perf_counter() - wall
    shutdown_pools(wait=True)  # reap the workers so that their CPU time is counted
    return result, wall, _children_cpu() - cpu


def main() -> int:
    original = preset("crash-recovery")
    scenario = original.with_overrides(SCALED)
    grid = {"policy.watcher_interval": WATCHER_INTERVALS}
    cores = cpu_count()
    load_before = os.getloadavg()
    replications = QUICK_REPLICATIONS if quick() else REPLICATIONS
    rounds = QUICK_ROUNDS if quick() else ROUNDS
    serial_times, pool_times = [], []
    identical = True
    for _ in range(rounds):
        serial, wall, cpu = serial_round(scenario, grid, replications)
        serial_times.append((wall, cpu))
        pooled, wall, cpu = pool_round(scenario, grid, replications)
        pool_times.append((wall, cpu))
        try:
            pd.testing.assert_frame_equal(serial.runs, pooled.runs)
        except AssertionError:
            identical = False
    serial_wall, serial_cpu = min(serial_times)
    pool_wall, pool_cpu = min(pool_times)
    runs = len(serial.runs)
    speedup = serial_wall / pool_wall
    target = TARGET_PER_CORE * cores
    recovery = serial.aggregate(["recovery_latency_mean"]).set_index("policy.watcher_interval")
    figures = [
        figure(
            "speedup",
            speedup,
            unit="x",
            goal=round(target, 2),
            better="higher",
            floor="the same sweep, serial",
            floor_value=serial_wall,
            floor_unit="s",
            digits=2,
        ),
        figure("serial_ms_per_run", 1000 * serial_wall / runs, unit="ms", digits=1),
    ]
    emit(
        "sweep",
        figures,
        scenario="crash-recovery",
        scaled={k: {"preset": _get(original, k), "used": v} for k, v in SCALED.items()},
        grid={"policy.watcher_interval": WATCHER_INTERVALS},
        replications=replications,
        runs=runs,
        rounds=rounds,
        cores=cores,
        load_average_before=[round(x, 2) for x in load_before],
        serial_wall_s=round(serial_wall, 2),
        process_pool_wall_s=round(pool_wall, 2),
        all_serial_wall_s=[round(w, 2) for w, _ in serial_times],
        all_process_pool_wall_s=[round(w, 2) for w, _ in pool_times],
        serial_cpu_per_wall=round(serial_cpu / serial_wall, 2),
        process_pool_cpu_per_wall_and_core=round(pool_cpu / (pool_wall * cores), 2),
        identical_runs_tables=identical,
        recovery_latency_mean_by_watcher_interval={
            str(w): round(float(recovery.loc[w, "recovery_latency_mean_mean"]), 1)
            for w in WATCHER_INTERVALS
        },
    )
    return 0 if identical else 1


def _get(scenario, dotted: str):
    value = scenario
    for part in dotted.split("."):
        value = getattr(value, part)
    return value


if __name__ == "__main__":
    sys.exit(main())
