"""Live against simulated, with the comparison's verdicts: prints one JSON object.

Default: issue 18's settings (sim.live_mode.settings.hand_check): 4 worker processes and a watcher
on PostgreSQL (embedded, or $LEASELAB_DSN), the seed's claim, TTL 2 s, heartbeat 0.5 s, watcher 1 s,
poll 0.2 s, exponential jobs of mean 1 s, a job holder killed about every 2 s, for --duration wall
seconds (default 100); then --seeds simulated runs of the same scenario (default 20).
--watcher-only: the claim does not take expired leases, so only the watcher recovers jobs.
--read-then-write: sim.live_mode.settings.read_then_write_race with examples/queues/read-then-write
(--sql DIR: another queue directory), live and simulated with the queue's SQL on PostgreSQL.

Reports what the time-scale guard measured before the run (each statement on the loaded table at
the run's concurrency, a replacement worker's start, the smallest sound scale), the delays the run
watched (restart lag, scheduler delay) and whether it stayed sound, and every judged row of
sim.compare with its verdict. The floor, measured in the same process just before and just after
the live run: a raw `SELECT 1` round trip on the same server and a bare interpreter start
(`python -c pass`); the guard's figures are reported as ratios to it, so that a busy machine is
told apart from slow statements or a slow worker start. Done when the run is sound, no row DIFFERs,
the recovery rows are judged (had enough recoveries) unless the scenario kills no worker, and, for
Lease Lab's own statements, no completion or effect happened twice (fenced). --quick: 30 wall
seconds and 5 simulated seeds. Prints one JSON object (benchmarks/figures.py).
"""

from __future__ import annotations

import argparse
import math
import subprocess
import sys
import time

import numpy as np
from figures import emit, figure

from sim.comparisons.live_vs_simulated import MEAN, TOO_FEW, compare, duplicate_completions
from sim.db.server import connect_dsn, open_connection
from sim.invariants import check
from sim.live_mode import live
from sim.live_mode.budget import kills_expected
from sim.live_mode.settings import READ_THEN_WRITE_QUEUE, hand_check, read_then_write_race
from sim.teaching.queue_lab import example

ROUND_TRIPS = 200  # SELECT 1 round trips per floor measurement
INTERPRETER_STARTS = 3  # bare interpreter starts per floor measurement


def _num(value) -> float | str | None:
    """A figure for strict JSON: NaN (nothing to show) as null, an unbounded end as "inf"."""
    value = float(value)
    if math.isnan(value):
        return None
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return round(value, 4)


def _quantiles(values) -> dict:
    values = np.asarray(values, dtype=float)
    if not len(values):
        return {"n": 0}
    p50, p90, top = np.percentile(values, [50, 90, 100])
    return {"n": len(values), "p50": _num(p50), "p90": _num(p90), "max": _num(top)}


def floor(dsn: str) -> dict:
    """Median wall seconds of a raw `SELECT 1` round trip (autocommit) and of a bare interpreter
    start, measured now."""
    with open_connection(dsn, autocommit=True) as conn:
        trips = []
        for _ in range(ROUND_TRIPS):
            began = time.perf_counter()
            conn.execute("SELECT 1").fetchone()
            trips.append(time.perf_counter() - began)
    starts = []
    for _ in range(INTERPRETER_STARTS):
        began = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        starts.append(time.perf_counter() - began)
    return {"select1_s": float(np.median(trips)), "interpreter_start_s": float(np.median(starts))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=100.0)
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--watcher-only", action="store_true")
    parser.add_argument("--read-then-write", action="store_true", help="the race preset, --sql")
    parser.add_argument("--sql", help="a queue directory: its SQL live and simulated")
    parser.add_argument("--quick", action="store_true", help="30 s live, 5 simulated seeds")
    args = parser.parse_args()
    if args.quick:
        args.duration, args.seeds = 30.0, 5
    sql = args.sql
    if args.read_then_write:
        scenario, name = read_then_write_race(), "read-then-write race"
        sql = sql or str(example(READ_THEN_WRITE_QUEUE))
    else:
        overrides = {"policy.claim_takes_expired": False} if args.watcher_only else {}
        scenario = hand_check(**overrides)
        name = "issue 18 hand check" + (" (watcher only)" if args.watcher_only else "")
    dsn = connect_dsn()
    before = floor(dsn)
    start = time.monotonic()
    run = live(scenario, duration=args.duration, sql=sql)
    live_wall = time.monotonic() - start
    after = floor(dsn)
    comparison = compare(run, args.seeds)
    guard = run.guard
    select1 = (before["select1_s"] + after["select1_s"]) / 2
    interpreter = (before["interpreter_start_s"] + after["interpreter_start_s"]) / 2
    details = {
        "scenario": name + (f" with --sql {sql}" if sql else ""),
        "duration_s": args.duration,
        "live_wall_over_duration": _num(live_wall / args.duration),
        "floor": {
            "select1_ms": {
                "before": _num(before["select1_s"] * 1000),
                "after": _num(after["select1_s"] * 1000),
            },
            "interpreter_start_s": {
                "before": _num(before["interpreter_start_s"]),
                "after": _num(after["interpreter_start_s"]),
            },
        },
        "guard": {
            "jobs_loaded": guard.jobs,
            "clients": guard.clients,
            "statement_median_ms": {k: _num(v * 1000) for k, v in guard.statements.items()},
            "statement_median_over_select1": {
                k: _num(v / select1) for k, v in guard.statements.items()
            },
            "replacement_start_s": _num(guard.replacement_start),
            "replacement_start_over_interpreter_start": _num(guard.replacement_start / interpreter),
            "smallest_sound_scale": _num(guard.smallest_scale),
        },
        "watched": {
            "restart_lag_s": _quantiles(run.restart_lags),
            "scheduler_delay_s": _quantiles(run.runner_lag),
        },
        "sound": run.sound,
        "unsound_reasons": run.unsound,
        "crashes": int(run.summary["crashes"]),
        "recoveries": int(run.summary["recoveries"]),
        "simulated_seeds": comparison.seeds,
        "simulated_with": comparison.simulated_with,
        "row_confidence": round(comparison.row_confidence, 5),
        "rows": {
            row: {
                "live": _num(r.live),
                "live_ci95": [_num(r.live_low), _num(r.live_high)],
                "simulated": _num(r.simulated),
                "simulated_ci95": [_num(r.sim_low), _num(r.sim_high)],
                "compared": r.compared,
                "estimate": _num(r.estimate),
                "interval": [_num(r.low), _num(r.high)],
                "verdict": r.verdict,
            }
            for row, r in comparison.table.iterrows()
            if r.compared
        },
        "verdict": comparison.verdict,
        "parts_live": {k: _num(v) for k, v in comparison.parts["live"].items()},
        "parts_simulated": {k: _num(v) for k, v in comparison.parts["simulated"].items()},
        "duplicate_completions": duplicate_completions(run),
        "duplicate_db_effects": int(run.summary["duplicate_db_effects"]),
        "double_claims": int(run.summary["double_claims"]),
        "invariants_ok": check(run).ok,
        "records_repaired": len(run.repaired),
    }
    clean = details["duplicate_completions"] == 0 and details["duplicate_db_effects"] == 0
    # a scenario that kills no worker has no recovery to judge: its count rows decide
    judged = comparison.table.loc[MEAN, "verdict"] != TOO_FEW or not kills_expected(scenario)
    details["done"] = bool(comparison.sound and not comparison.differ and judged and (clean or sql))
    slowest = max(guard.statements, key=guard.statements.get) if guard.statements else None
    figures = [
        figure("rows_differing", len(comparison.differ), unit="rows", goal=0, digits=0),
        figure("unsound_reasons", len(run.unsound), unit="", goal=0, digits=0),
        figure(
            "slowest_statement_over_select1",
            guard.statements[slowest] / select1 if slowest else None,
            unit="x",
            floor="raw SELECT 1 round trip",
            floor_value=select1 * 1000,
            floor_unit="ms",
            note=slowest,
            digits=1,
        ),
        figure(
            "replacement_start_over_interpreter_start",
            guard.replacement_start / interpreter,
            unit="x",
            floor="python -c pass",
            floor_value=interpreter,
            floor_unit="s",
            digits=2,
        ),
        figure("live_wall_over_duration", live_wall / args.duration, unit="x", digits=2),
    ]
    if not sql:  # Lease Lab's own statements are fenced: nothing happens twice
        figures.append(
            figure(
                "duplicate_completions_and_effects",
                details["duplicate_completions"] + details["duplicate_db_effects"],
                goal=0,
                digits=0,
            )
        )
    emit("live", figures, **details)


if __name__ == "__main__":
    main()
