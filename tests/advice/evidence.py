"""Evidence tables made by hand, for tests of what the advice says about its evidence."""

from __future__ import annotations

import pandas as pd

from sim.theory.stats import wilson_interval


def evidence_at_a(advice, seen: tuple[int, int] | None = None, **row) -> pd.DataFrame:
    """One simulated row at A (the sweep's columns), with what `row` changes; `seen`: (false
    expiries, leases), with their share and 95% Wilson interval."""
    if seen is not None:
        lapsed, leases = seen
        low, high = wilson_interval(lapsed, leases)
        row = {
            "leases": leases,
            "false_expiries": lapsed,
            "false_expiry": lapsed / leases,
            "false_expiry_ci_low": low,
            "false_expiry_ci_high": high,
        } | row
    base = {
        "name": "A",
        "ttl": advice.ttl,
        "heartbeat_interval": advice.heartbeat_interval,
        "watcher_interval": advice.watcher_interval,
        "recommended": True,
        "runs": 4,
        "jobs": 6000,
        "crash_rate": 20.8,
        "utilisation": 0.6,
        "leases": 6080,
        "false_expiries": 2,
        "false_expiry": 2 / 6080,
        "false_expiry_ci_low": wilson_interval(2, 6080)[0],
        "false_expiry_ci_high": wilson_interval(2, 6080)[1],
        "predicted_false_expiry": advice.predicted_false_expiry,
        "recoveries": 80,
        "recovery_mean": advice.predicted_recovery_mean,
        "recovery_ci_low": advice.predicted_recovery_mean - 0.1,
        "recovery_ci_high": advice.predicted_recovery_mean + 0.1,
        "predicted_recovery_mean": advice.predicted_recovery_mean + 0.02,
        "db_load": advice.db_load,
        "predicted_db_load": advice.db_load,
    }
    return pd.DataFrame([base | row])
