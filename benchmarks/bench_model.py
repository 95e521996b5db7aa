"""The model on the memory backend against a bare SimPy loop, and peak memory for 1M jobs.

Runs the `baseline` preset for at least 100k jobs (Poisson arrivals below capacity) and measures
wall seconds, simulated jobs per wall second and the number of SimPy events the run scheduled.
The floor is a bare SimPy loop that schedules the same number of timeouts, measured in the same
process right after; budget: ratio <= 3. To show where the time goes, the backend calls of one
run are recorded and replayed on a fresh MemoryBackend without SimPy: the backend alone, against
the same floor (backend alone + floor is a lower bound for any model on this backend). Then, each
in a child process, 1M-job runs with heartbeat records off, on, and on with a heartbeat every
second (RSS_RUNS) report their peak RSS (goal: < 1 GB each); --quick runs 200k jobs and
extrapolates. Prints one JSON object
(benchmarks/figures.py).
"""

from __future__ import annotations

import gc
import json
import resource
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import simpy
from figures import emit, figure, quick

from sim.db.memory import MemoryBackend
from sim.model.world import build, run_to_horizon
from sim.scenario.settings import preset

JOBS = 100_000
BIG_JOBS, QUICK_BIG_JOBS = 1_000_000, 200_000
RATIO_GOAL, RATIO_LIMIT = 3.0, 7.5  # DESIGN.md's goal; no change may pass 7.5x
RSS_GOAL_GB = 1.0  # issue 37: a 1M-job run, heartbeat records on and off


def baseline(jobs: int, *, record_heartbeats: bool = True, heartbeat_interval: float | None = None):
    scenario = preset("baseline")
    rate = scenario.workload.rate
    overrides = {
        "workload.jobs": jobs,
        "horizon": jobs / rate + 60.0,
        "record_heartbeats": record_heartbeats,
    }
    if heartbeat_interval is not None:
        overrides["policy.heartbeat_interval"] = heartbeat_interval
    return scenario.with_overrides(overrides)


def simulate(
    jobs: int, *, record_heartbeats: bool = True, heartbeat_interval: float | None = None
) -> tuple[float, int, int, int]:
    """(wall seconds, SimPy events scheduled, jobs completed, heartbeat records)."""
    spec = baseline(
        jobs, record_heartbeats=record_heartbeats, heartbeat_interval=heartbeat_interval
    )
    world = build(spec, MemoryBackend())
    wall = run_to_horizon(world, progress=False)
    events = next(world.env._eid)  # SimPy numbers every event it schedules
    kinds = Counter(e.kind for e in world.log)
    return wall, events, kinds["complete"], kinds["heartbeat"]


class RecordingBackend:
    """Passes every call on to a MemoryBackend and records it, to be replayed without SimPy."""

    CALLS = frozenset({"connect", "execute", "resume", "begin", "commit", "rollback", "crash"})

    def __init__(self):
        self.backend = MemoryBackend()
        self.calls: list[tuple[str, tuple]] = []

    def __getattr__(self, name: str):
        method = getattr(self.backend, name)
        if name not in self.CALLS:
            return method
        calls = self.calls

        def record(*args):
            calls.append((name, tuple(dict(a) if isinstance(a, dict) else a for a in args)))
            return method(*args)

        return record


def backend_alone(jobs: int) -> tuple[float, int]:
    """(process seconds of the backend calls of a `jobs` run replayed on a fresh backend, calls)."""
    recorder = RecordingBackend()
    world = build(baseline(jobs), recorder)
    world.env.run(until=world.scenario.horizon)
    fresh = MemoryBackend()
    calls = [(getattr(fresh, name), args) for name, args in recorder.calls]
    del world, recorder
    # the recording (about a million calls) is the benchmark's, not the backend's: frozen, no
    # collection walks it (one that did added a second or more, depending on when it fell)
    gc.collect()
    gc.freeze()
    try:
        start = time.process_time()
        for call, args in calls:
            call(*args)
        return time.process_time() - start, len(calls)
    finally:
        gc.unfreeze()


def bare_simpy(events: int, processes: int) -> float:
    """Wall seconds for `processes` SimPy processes that schedule `events` timeouts in total."""
    env = simpy.Environment()
    per_process = events // processes

    def loop():
        for _ in range(per_process):
            yield env.timeout(1.0)

    for _ in range(processes):
        env.process(loop())
    start = time.perf_counter()
    env.run()
    return time.perf_counter() - start


def peak_rss_gb() -> float:
    """This process's peak RSS in GB: VmHWM, which starts anew at exec (ru_maxrss keeps the peak
    of the process that forked us), or ru_maxrss where there is no /proc."""
    try:
        status = Path("/proc/self/status").read_text()
    except OSError:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024**2
    kb = next(line.split()[1] for line in status.splitlines() if line.startswith("VmHWM:"))
    return int(kb) / 1024**2


def peak_rss_child(jobs: int, **settings) -> dict:
    """A `jobs` run in a fresh interpreter: its wall seconds, completions, heartbeat records, RSS
    after the imports and peak RSS (GB)."""
    code = (
        "import json, sys; sys.path.insert(0, 'benchmarks');"
        "from bench_model import peak_rss_gb as gb, simulate;"
        "start = gb();"
        f"wall, events, done, beats = simulate({jobs}, **{settings!r});"
        "print(json.dumps({'wall_seconds': wall, 'completed': done, 'heartbeat_records': beats,"
        " 'start_rss_gb': start, 'peak_rss_gb': gb()}))"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


# The baseline's jobs (median 1 s) rarely outlast its 10 s heartbeat interval: the third run renews
# every second, so that heartbeat records are a good part of the log.
RSS_RUNS = {
    "heartbeat_records_off": {"record_heartbeats": False},
    "heartbeat_records_on": {"record_heartbeats": True},
    "heartbeat_records_on_every_1s": {"record_heartbeats": True, "heartbeat_interval": 1.0},
}


def rss_figures(jobs: int) -> tuple[list[dict], dict]:
    """Peak RSS of 1M-job runs (RSS_RUNS). With fewer `jobs` (--quick) the 1M figure is
    extrapolated: RSS after imports + (peak - that) x 1M / jobs."""
    figures, details = [], {}
    for label, settings in RSS_RUNS.items():
        big = peak_rss_child(jobs, **settings)
        growth = (big["peak_rss_gb"] - big["start_rss_gb"]) * BIG_JOBS / jobs
        beats = big["heartbeat_records"] / jobs
        note = f"{beats:.2f} heartbeat records per job"
        if jobs != BIG_JOBS:
            note += f"; extrapolated from {jobs:,} jobs"
        figures.append(
            figure(
                f"peak_rss_1m_jobs_{label}",
                big["start_rss_gb"] + growth,
                unit="GB",
                goal=RSS_GOAL_GB,
                note=note,
            )
        )
        details[label] = {
            "jobs": jobs,
            "wall_seconds": round(big["wall_seconds"], 1),
            "completed": big["completed"],
            "heartbeat_records_per_job": round(beats, 3),
            "start_rss_gb": round(big["start_rss_gb"], 3),
            "peak_rss_gb": round(big["peak_rss_gb"], 3),
        }
    return figures, details


def main() -> None:
    workers = preset("baseline").policy.workers
    wall, events, completed, _ = simulate(JOBS)
    floor = bare_simpy(events, workers)
    ratio = wall / floor
    backend, calls = backend_alone(JOBS)
    bare = {"floor": "bare SimPy loop, same events", "floor_value": floor, "floor_unit": "s"}
    figures = [
        figure("ratio_to_bare_simpy", ratio, unit="x", goal=RATIO_GOAL, **bare),
        figure("jobs_per_wall_second", completed / wall, unit="jobs/s", digits=0),
        figure("backend_alone_ratio_to_bare_simpy", backend / floor, unit="x", **bare),
        # any model on this backend runs its statements and schedules its timeouts: a lower bound
        figure("lower_bound_ratio", (backend + floor) / floor, unit="x", **bare),
        figure("simpy_events_per_job", events / JOBS, unit="events", digits=2),
        figure("backend_calls_per_job", calls / JOBS, unit="calls", digits=2),
    ]
    rss, big = rss_figures(QUICK_BIG_JOBS if quick() else BIG_JOBS)
    emit(
        "model",
        figures + rss,
        scenario="baseline",
        jobs=JOBS,
        completed=completed,
        wall_seconds=round(wall, 3),
        simpy_events=events,
        bare_simpy_seconds=round(floor, 3),
        ratio_limit=RATIO_LIMIT,
        ratio_within_limit=ratio <= RATIO_LIMIT,
        backend_alone_seconds=round(backend, 3),
        us_per_job={
            "model": round(wall / JOBS * 1e6, 2),
            "backend_alone": round(backend / JOBS * 1e6, 2),
            "bare_simpy": round(floor / JOBS * 1e6, 2),
            # what is left for the model's own code: protocol, driver, sessions, producer, log
            "model_own": round((wall - backend - floor) / JOBS * 1e6, 2),
        },
        self_peak_rss_gb=round(peak_rss_gb(), 3),
        big_runs=big,
    )


if __name__ == "__main__":
    main()
