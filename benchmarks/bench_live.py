"""Live against simulated at issue 18's settings: prints one JSON object.

4 worker processes and a watcher on PostgreSQL (embedded, or $LEASELAB_DSN), the seed's claim,
TTL 2 s, heartbeat 0.5 s, watcher 1 s, poll 0.2 s, exponential jobs of mean 1 s, a job holder
killed about every 2 s, for --duration wall seconds (default 100); then --seeds simulated runs of
the same scenario (default 20). Done when the live mean recovery lies within the simulated 95%
interval widened by 10% and no completion happened twice (fenced). --watcher-only: the claim does
not take expired leases, so only the watcher recovers jobs.
"""

from __future__ import annotations

import argparse
import json
import math
import time

from sim.comparison import compare, duplicate_completions
from sim.invariants import check
from sim.live import live
from sim.live.settings import hand_check


def _num(value) -> float | None:
    value = float(value)
    return None if math.isnan(value) else round(value, 4)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=100.0)
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--watcher-only", action="store_true")
    args = parser.parse_args()
    overrides = {"policy.claim_takes_expired": False} if args.watcher_only else {}
    start = time.monotonic()
    run = live(hand_check(**overrides), duration=args.duration)
    comparison = compare(run, args.seeds)
    table = comparison.table
    row = table.loc["recovery latency mean (s)"]
    out = {
        "scenario": "issue 18 hand check" + (" (watcher only)" if args.watcher_only else ""),
        "duration_s": args.duration,
        "wall_seconds": round(time.monotonic() - start, 1),
        "crashes": int(run.summary["crashes"]),
        "recoveries": int(run.summary["recoveries"]),
        "live_recovery_mean": _num(row.live),
        "live_recovery_ci95": [_num(row.live_low), _num(row.live_high)],
        "simulated_recovery_mean": _num(row.simulated),
        "simulated_recovery_ci95": [_num(row.sim_low), _num(row.sim_high)],
        "simulated_seeds": comparison.seeds,
        "band_widened_10pct": [_num(v) for v in comparison.band],
        "live_mean_within_band": comparison.within,
        "p50": {
            "live": _num(table.loc["recovery latency p50 (s)", "live"]),
            "simulated": _num(table.loc["recovery latency p50 (s)", "simulated"]),
        },
        "p90": {
            "live": _num(table.loc["recovery latency p90 (s)", "live"]),
            "simulated": _num(table.loc["recovery latency p90 (s)", "simulated"]),
        },
        "parts_live": {k: _num(v) for k, v in comparison.parts["live"].items()},
        "parts_simulated": {k: _num(v) for k, v in comparison.parts["simulated"].items()},
        "duplicate_completions": duplicate_completions(run),
        "duplicate_db_effects": int(run.summary["duplicate_db_effects"]),
        "false_expiries": int(run.summary["false_expiries"]),
        "invariants_ok": check(run).ok,
        "records_repaired": len(run.repaired),
        "overload_warnings": comparison.warnings,
    }
    out["done"] = bool(
        out["live_mean_within_band"]
        and out["duplicate_completions"] == 0
        and out["duplicate_db_effects"] == 0
    )
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
