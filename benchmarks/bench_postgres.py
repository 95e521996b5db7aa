"""PostgresBackend throughput against raw psycopg round trips on the same server, in one run.

Runs the `baseline` preset (5000 jobs by default, Poisson arrivals below capacity; the horizon is
scaled to let them all arrive and finish) on MemoryBackend, then on PostgresBackend (the
embedded server, or $LEASELAB_DSN). The Postgres run advances in 200 slices of simulated time;
after each slice, a short burst of raw psycopg `SELECT 1` round trips on an autocommit
connection samples what the server and this machine allow at that moment. So both rates are
measured over the same minutes, interleaved, and a busy neighbour slows both alike:

    statements per second = every statement the model issued (COMMIT and ROLLBACK included)
                            / wall seconds spent in the simulation slices
    raw round trips per second = SELECT 1 round trips / wall seconds spent in the bursts

Budget: their ratio >= 0.4. Also reports wall time on both backends (the whole run, as
sim.run measures it) and whether the two event logs are identical. --quick: 1000 jobs, one
repeat. Prints one JSON object (benchmarks/figures.py).

    python benchmarks/bench_postgres.py [--jobs N] [--repeats R] [--quick]
"""

from __future__ import annotations

import argparse
import os
import time

import psycopg
from figures import emit, figure

import sim
from sim.db.postgres import PostgresBackend
from sim.db.server import embedded_server, redact_dsn
from sim.model.world import build
from sim.scenario.settings import preset

RATIO_BUDGET = 0.4
SLICES = 200
BURST = 100  # SELECT 1 round trips after each slice


def scenario(jobs: int):
    base = preset("baseline")
    return base.with_overrides(
        {
            "workload.jobs": jobs,
            "horizon": jobs / base.workload.rate + 60.0,
            "record_heartbeats": False,
        }
    )


def select1(conn: psycopg.Connection, n: int) -> float:
    """Wall seconds for `n` raw psycopg `SELECT 1` round trips."""
    start = time.perf_counter()
    for _ in range(n):
        conn.execute("SELECT 1").fetchone()
    return time.perf_counter() - start


def interleaved(spec, dsn: str, conn: psycopg.Connection) -> dict:
    """One Postgres run in slices, with a SELECT 1 burst after each."""
    with PostgresBackend(dsn) as db:
        world = build(spec, db)
        sim_seconds = raw_seconds = 0.0
        for i in range(1, SLICES + 1):
            start = time.perf_counter()
            world.env.run(until=spec.horizon * i / SLICES)
            sim_seconds += time.perf_counter() - start
            raw_seconds += select1(conn, BURST)
    statements = sum(world.statement_counts.values())
    rate, raw = statements / sim_seconds, SLICES * BURST / raw_seconds
    return {"statements": statements, "rate": rate, "raw": raw, "ratio": rate / raw}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=5000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="1000 jobs, one repeat")
    args = parser.parse_args()
    if args.quick:
        args.jobs, args.repeats = 1000, 1
    dsn = os.environ.get("LEASELAB_DSN") or embedded_server().get_uri()
    spec = scenario(args.jobs)

    memory = sim.run(spec, backend="memory", progress=False)
    postgres = sim.run(
        spec, backend="postgres", dsn=dsn, progress=False
    )  # also warms the server up
    with psycopg.connect(dsn, autocommit=True) as conn:
        select1(conn, 1000)
        runs = sorted(
            (interleaved(spec, dsn, conn) for _ in range(args.repeats)), key=lambda r: r["ratio"]
        )
        version = conn.execute("SHOW server_version").fetchone()[0]
    median = runs[len(runs) // 2]
    figures = [
        figure(
            "statements_over_select1",
            median["ratio"],
            unit="x",
            goal=RATIO_BUDGET,
            better="higher",
            floor="raw psycopg SELECT 1 round trips, interleaved",
            floor_value=median["raw"],
            floor_unit="/s",
        ),
        figure("postgres_statements_per_second", median["rate"], unit="/s", digits=0),
        figure(
            "postgres_over_memory_wall",
            postgres.wall_seconds / memory.wall_seconds,
            unit="x",
            floor="the same run on the memory backend",
            floor_value=memory.wall_seconds,
            floor_unit="s",
            digits=1,
        ),
    ]
    emit(
        "postgres",
        figures,
        scenario="baseline",
        jobs=args.jobs,
        horizon=spec.horizon,
        server=redact_dsn(dsn),
        server_version=version,
        completed=int(postgres.summary["completed"]),
        statements=median["statements"],
        ratio_runs=[round(r["ratio"], 3) for r in runs],
        memory_wall_seconds=round(memory.wall_seconds, 3),
        postgres_wall_seconds=round(postgres.wall_seconds, 3),
        event_logs_identical=bool(
            memory.events.equals(postgres.events) and memory.tables == postgres.tables
        ),
    )


if __name__ == "__main__":
    main()
