"""Small statistics shared by the analysis figures, the peer comparison and the design review.

- `mean_ci`: mean and Student-t confidence interval of replications;
- `summarize`: a one-row-per-run frame -> one row per group with `<metric>_mean/_ci_low/_ci_high`
  (the column shape of `SweepResult.aggregate`);
- `add_rates`: derived per-run rates (false-expiry rate, race probability, ...) that the summary
  does not carry, because their denominators differ.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
import pandas as pd
from scipy import stats

# derived metric -> (numerator, denominator), both summary metrics of a Run
RATES: dict[str, tuple[str, str]] = {
    "false_expiry_rate": ("false_expiries", "leases"),
    "race_probability": ("double_claims", "leases"),
    "duplicate_charge_rate": ("duplicate_external_effects", "jobs"),
    "duplicate_effect_rate": ("duplicate_db_effects", "jobs"),
    "recovered_share": ("recoveries", "crashed_jobs"),
}


def mean_ci(values: Iterable[float], confidence: float = 0.95) -> tuple[float, float, float, int]:
    """(mean, ci_low, ci_high, n) of the finite values; the interval is NaN with fewer than two."""
    x = np.asarray([v for v in values if v is not None], dtype=float)
    x = x[np.isfinite(x)]
    n = len(x)
    if n == 0:
        return np.nan, np.nan, np.nan, 0
    mean = float(x.mean())
    if n < 2:
        return mean, np.nan, np.nan, n
    sem = float(x.std(ddof=1)) / np.sqrt(n)
    if sem == 0.0:
        return mean, mean, mean, n
    half = float(stats.t.ppf(0.5 + confidence / 2, n - 1)) * sem
    return mean, mean - half, mean + half, n


def add_rates(frame: pd.DataFrame) -> pd.DataFrame:
    """A copy of a one-row-per-run frame with the RATES columns its counts allow (NaN for 0/0)."""
    out = frame.copy()
    if "crashed_jobs" not in out and {"recoveries", "unrecovered_crashes"} <= set(out.columns):
        out["crashed_jobs"] = out["recoveries"].astype(float) + out["unrecovered_crashes"].astype(float)
    for name, (num, den) in RATES.items():
        if name not in out and num in out and den in out:
            denominator = out[den].astype(float)
            out[name] = out[num].astype(float) / denominator.where(denominator > 0)
    return out


def summarize(runs: pd.DataFrame, by: str | Sequence[str], metrics: Sequence[str] | None = None,
              confidence: float = 0.95) -> pd.DataFrame:
    """One row per group of `by`: the keys, `n`, and `<metric>_mean`, `_ci_low`, `_ci_high`.

    `metrics` defaults to every numeric column that is not a key, `replication` or `seed`.
    """
    keys = [by] if isinstance(by, str) else list(by)
    if metrics is None:
        skip = set(keys) | {"replication", "seed"}
        metrics = [c for c in runs.columns if c not in skip and pd.api.types.is_numeric_dtype(runs[c])]
    rows = []
    for key, group in runs.groupby(keys, sort=True, dropna=False):
        key = key if isinstance(key, tuple) else (key,)
        row = dict(zip(keys, key, strict=True))
        row["n"] = len(group)
        for metric in metrics:
            mean, low, high, _ = mean_ci(group[metric].astype(float), confidence)
            row[f"{metric}_mean"], row[f"{metric}_ci_low"], row[f"{metric}_ci_high"] = mean, low, high
        rows.append(row)
    columns = [*keys, "n", *(f"{m}_{s}" for m in metrics for s in ("mean", "ci_low", "ci_high"))]
    return pd.DataFrame(rows, columns=columns)
