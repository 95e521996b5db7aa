"""PostgresBackend throughput against raw psycopg round trips on the same server, in one run.

Runs the `baseline` preset (5000 jobs by default, Poisson arrivals below capacity; the horizon is
scaled to let them all arrive and finish) on MemoryBackend, then several times on PostgresBackend
(the embedded server, or $LEASELAB_DSN). Around every Postgres run, a burst of raw psycopg
`SELECT 1` round trips on an autocommit connection measures what the server and this machine
allow at that moment; each run's ratio divides its statements per wall second (every statement
the model issued, COMMIT and ROLLBACK included, over the simulation's wall time) by the mean of
the bursts just before and after it, so that a busy neighbour slows both sides alike. Reports
the median run. Budget: ratio >= 0.4. Prints one JSON object.

    python benchmarks/bench_postgres.py [--jobs N] [--repeats R]
"""

from __future__ import annotations

import argparse
import json
import os
import time

import psycopg

import sim
from sim.db.server import embedded_server, redact_dsn
from sim.scenario import preset

RATIO_BUDGET = 0.4
BURST_SECONDS = 1.0


def scenario(jobs: int):
    base = preset("baseline")
    return base.with_overrides({
        "workload.jobs": jobs, "horizon": jobs / base.workload.rate + 60.0, "record_heartbeats": False,
    })


def select1_rate(conn: psycopg.Connection, seconds: float = BURST_SECONDS) -> float:
    """Raw psycopg `SELECT 1` round trips per second, over about `seconds`."""
    done, start = 0, time.perf_counter()
    while True:
        for _ in range(200):
            conn.execute("SELECT 1").fetchone()
        done += 200
        elapsed = time.perf_counter() - start
        if elapsed >= seconds:
            return done / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=5000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    dsn = os.environ.get("LEASELAB_DSN") or embedded_server().get_uri()
    spec = scenario(args.jobs)

    memory = sim.run(spec, backend="memory", progress=False)
    sim.run(spec.with_overrides({"workload.jobs": 50, "horizon": 60.0}), backend="postgres", dsn=dsn,
            progress=False)  # warm up: server caches, first connections
    runs, bursts = [], []
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SELECT 1")
        bursts.append(select1_rate(conn))
        for _ in range(args.repeats):
            run = sim.run(spec, backend="postgres", dsn=dsn, progress=False)
            bursts.append(select1_rate(conn))
            statements = sum(run.statement_counts.values())
            raw = (bursts[-2] + bursts[-1]) / 2
            runs.append({"wall": run.wall_seconds, "statements": statements,
                         "rate": statements / run.wall_seconds, "raw": raw,
                         "ratio": statements / run.wall_seconds / raw, "run": run})
    median = sorted(runs, key=lambda r: r["ratio"])[len(runs) // 2]
    pg_run = median["run"]
    same = memory.events.equals(pg_run.events) and memory.tables == pg_run.tables
    result = {
        "scenario": "baseline",
        "jobs": args.jobs,
        "horizon": spec.horizon,
        "server": redact_dsn(dsn),
        "server_version": pg_run_version(dsn),
        "completed": int(pg_run.summary["completed"]),
        "statements": median["statements"],
        "postgres_statements_per_second": round(median["rate"]),
        "raw_select1_per_second": round(median["raw"]),
        "ratio": round(median["ratio"], 3),
        "ratio_runs": [round(r["ratio"], 3) for r in runs],
        "ratio_budget": RATIO_BUDGET,
        "ratio_within_budget": median["ratio"] >= RATIO_BUDGET,
        "memory_wall_seconds": round(memory.wall_seconds, 3),
        "postgres_wall_seconds": round(median["wall"], 3),
        "postgres_over_memory_wall": round(median["wall"] / memory.wall_seconds, 1),
        "event_logs_identical": bool(same),
        "select1_bursts_per_second": [round(b) for b in bursts],
    }
    print(json.dumps(result, indent=2))


def pg_run_version(dsn: str) -> str:
    with psycopg.connect(dsn) as conn:
        return conn.execute("SHOW server_version").fetchone()[0]


if __name__ == "__main__":
    main()
