"""Small statistics shared by the sweeps, the analysis figures, the peer comparison and the design
review.

- `mean_ci`: mean and Student-t confidence interval of replications;
- `summarize`: a one-row-per-run frame -> one row per group with `n` and
  `<metric>_mean/_ci_low/_ci_high`; the one implementation of per-group intervals
  (`SweepResult.aggregate` calls it);
- `add_rates`: derived per-run rates (false-expiry rate, race probability, ...) that the summary
  does not carry, because their denominators differ;
- `wilson_interval`: the interval of a binomial proportion (false expiries per lease), sound at 0;
- `pooled_mean_ci`: the mean of values pooled from several runs, each given by count, mean and sd.

Interval semantics, everywhere: the mean of a metric and its two-sided Student-t interval at
`confidence` are over that metric's values in the group; missing values (NaN, e.g. a recovery
latency in a run without crashes; also +-inf) are left out of that metric's mean and interval;
with fewer than two values the interval is NaN; identical values give a zero-width interval.
`n` is the number of runs in the group, whatever the metric.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import numpy as np
import pandas as pd

from sim.errors import ConfigError
from sim.support.scipy_steps import norm_ppf, t_ppf

# derived metric -> (numerator, denominator), both summary metrics of a Run
RATES: dict[str, tuple[str, str]] = {
    "false_expiry_rate": ("false_expiries", "leases"),
    "race_probability": ("double_claims", "leases"),
    "duplicate_charge_rate": ("duplicate_external_effects", "jobs"),
    "duplicate_effect_rate": ("duplicate_db_effects", "jobs"),
    "recovered_share": ("recoveries", "crashed_jobs"),
}


def mean_ci(values: Iterable[float], confidence: float = 0.95) -> tuple[float, float, float, int]:
    """(mean, ci_low, ci_high, n) of the finite values (n counts those);
    semantics as in the module docstring."""
    _check_confidence(confidence)
    x = np.asarray([v for v in values if v is not None], dtype=float)
    x = x[np.isfinite(x)]
    n = len(x)
    if n == 0:
        return np.nan, np.nan, np.nan, 0
    mean = float(x.mean())
    std = float(x.std(ddof=1)) if n > 1 else np.nan
    half = float(_half_width(std, n, confidence))
    return mean, mean - half, mean + half, n


def _half_width(std, count, confidence: float):
    """Half-width of the Student-t interval of a mean from its sample std and value count
    (NaN below 2)."""
    std, count = np.asarray(std, dtype=float), np.asarray(count, dtype=float)
    dof = np.where(count >= 2, count - 1, np.nan)
    with np.errstate(divide="ignore", invalid="ignore"):
        return t_ppf(0.5 + confidence / 2, dof) * std / np.sqrt(count)


def _check_confidence(confidence) -> None:
    """ConfigError unless 0 < confidence < 1 (a probability, not a percentage)."""
    if (
        isinstance(confidence, bool)
        or not isinstance(confidence, int | float | np.number)
        or not 0 < confidence < 1
    ):
        raise ConfigError(f"confidence: must be between 0 and 1, got {confidence!r}")


def add_rates(frame: pd.DataFrame) -> pd.DataFrame:
    """A copy of a one-row-per-run frame with the RATES columns its counts allow (NaN for 0/0)."""
    out = frame.copy()
    if "crashed_jobs" not in out and {"recoveries", "unrecovered_crashes"} <= set(out.columns):
        out["crashed_jobs"] = out["recoveries"].astype(float) + out["unrecovered_crashes"].astype(
            float
        )
    for name, (num, den) in RATES.items():
        if name not in out and num in out and den in out:
            denominator = out[den].astype(float)
            out[name] = out[num].astype(float) / denominator.where(denominator > 0)
    return out


def summarize(
    runs: pd.DataFrame,
    by: str | Sequence[str],
    metrics: Sequence[str] | None = None,
    confidence: float = 0.95,
    *,
    sort: bool = True,
) -> pd.DataFrame:
    """One row per group of `by`: the keys, `n`, and `<metric>_mean`, `_ci_low`, `_ci_high`.

    Semantics of `n`, missing values and intervals: the module docstring. `by` may be empty (one
    group: the whole frame). Groups come sorted by their keys, or in order of first appearance
    with sort=False; NaN keys form groups of their own. `metrics` defaults to every numeric
    column that is not a key, `replication` or `seed`.
    """
    keys = [by] if isinstance(by, str) else list(by)
    if metrics is None:
        skip = set(keys) | {"replication", "seed"}
        metrics = [
            c for c in runs.columns if c not in skip and pd.api.types.is_numeric_dtype(runs[c])
        ]
    metrics = [metrics] if isinstance(metrics, str) else list(metrics)
    _check_confidence(confidence)
    missing = [c for c in [*keys, *metrics] if c not in runs.columns]
    if missing:
        raise ConfigError(
            f"{missing[0]}: not a column of the frame (columns: "
            f"{', '.join(map(str, runs.columns))})"
        )
    values = runs[metrics].astype(float)
    values = values.where(np.isfinite(values))  # +-inf is missing too
    grouper = [runs[k] for k in keys] if keys else np.zeros(len(runs), dtype=int)
    groups = values.groupby(grouper, sort=sort, dropna=False)
    columns = {"n": groups.size().astype(np.int64)}
    if metrics:
        moments = groups.agg(["mean", "std", "count"])
        for name in metrics:
            mean = moments[(name, "mean")].astype(float)
            half = _half_width(moments[(name, "std")], moments[(name, "count")], confidence)
            columns[f"{name}_mean"] = mean
            columns[f"{name}_ci_low"] = mean - half
            columns[f"{name}_ci_high"] = mean + half
    table = pd.concat(columns, axis=1)
    parts = [table.index.to_frame(index=False)] if keys else []
    return pd.concat([*parts, table.reset_index(drop=True)], axis=1)


def wilson_interval(successes, trials, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval of a binomial proportion (well behaved at 0 and 1 successes)."""
    successes, trials = float(successes), float(trials)
    if trials <= 0:
        return float("nan"), float("nan")
    z = float(norm_ppf((1 + confidence) / 2))
    p = successes / trials
    centre = (p + z * z / (2 * trials)) / (1 + z * z / trials)
    half = (
        z * math.sqrt(p * (1 - p) / trials + z * z / (4 * trials * trials)) / (1 + z * z / trials)
    )
    low = 0.0 if successes <= 0 else max(0.0, centre - half)
    high = 1.0 if successes >= trials else min(1.0, centre + half)
    return low, high


def pooled_mean_ci(
    counts, means, sds, confidence: float = 0.95, *, least: int = 10
) -> tuple[float, float, float, int]:
    """(mean, ci_low, ci_high, n) of the values of several runs pooled, each run given by its
    count, mean and sample sd: the exact pooled mean and sd, and the Student-t interval over all n
    values (not over the runs, so that two runs of 40 recoveries give an interval, not a t with 1
    degree of freedom). The values are durations: an interval reaching below 0 means too few of
    them, and so does n < least; both give NaN bounds (say "too few", never print a negative)."""
    _check_confidence(confidence)
    n = np.asarray(counts, dtype=float)
    m = np.asarray(means, dtype=float)
    sd = np.nan_to_num(np.asarray(sds, dtype=float), nan=0.0)  # a run of one value has no sd
    keep = n > 0
    n, m, sd = n[keep], m[keep], sd[keep]
    total = int(n.sum())
    if total == 0:
        return np.nan, np.nan, np.nan, 0
    mean = float(np.sum(n * m) / total)
    if total < max(2, least):
        return mean, np.nan, np.nan, total
    squares = float(np.sum((n - 1) * sd**2 + n * (m - mean) ** 2))
    half = float(_half_width(math.sqrt(squares / (total - 1)), total, confidence))
    if mean - half < 0:
        return mean, np.nan, np.nan, total
    return mean, mean - half, mean + half, total
