"""Two samples, one question: does the difference between them exceed what chance explains?

Used by sim.compare to put a live run beside simulated runs of the same scenario. Each function
returns an estimate of the difference and its interval at `confidence`; "they differ" means the
interval leaves out no-difference (0 for a difference, 1 for a ratio), so a verdict never
contradicts the interval printed beside it.

- `mean_difference`: difference of two means, Welch's interval (unequal variances);
- `quantile_difference`: difference of two sample quantiles, percentile bootstrap on a seeded
  stream of its own (resampling each sample separately);
- `rate_ratio`: one run's count against the per-run counts of n runs, the exact conditional test
  of two Poisson rates (live | total ~ Binomial), with counts divided by the runs' own
  dispersion (variance / mean) when it exceeds Poisson's, so that runs that vary more than a
  Poisson count do not make chance look like a difference.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import stats

BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 24  # the bootstrap's own stream: same samples, same interval


def _finite(values) -> np.ndarray:
    x = np.asarray(values, dtype=float)
    return x[np.isfinite(x)]


def mean_difference(a, b, confidence: float = 0.95) -> tuple[float, float, float]:
    """(mean(a) - mean(b), low, high): Welch's t interval; NaN ends with fewer than 2 values in
    either sample (the estimate needs one each)."""
    a, b = _finite(a), _finite(b)
    if len(a) == 0 or len(b) == 0:
        return np.nan, np.nan, np.nan
    d = float(a.mean() - b.mean())
    if len(a) < 2 or len(b) < 2:
        return d, np.nan, np.nan
    va, vb = a.var(ddof=1) / len(a), b.var(ddof=1) / len(b)
    se = math.sqrt(va + vb)
    if se == 0:
        return d, d, d
    dof = (va + vb) ** 2 / (va**2 / (len(a) - 1) + vb**2 / (len(b) - 1))
    half = float(stats.t.ppf(0.5 + confidence / 2, dof)) * se
    return d, d - half, d + half


def quantile_difference(a, b, q: float, confidence: float = 0.95) -> tuple[float, float, float]:
    """(quantile_q(a) - quantile_q(b), low, high): percentile bootstrap interval of the
    difference (BOOTSTRAP_RESAMPLES resamples of each sample); NaN ends below 2 values each."""
    a, b = _finite(a), _finite(b)
    if len(a) == 0 or len(b) == 0:
        return np.nan, np.nan, np.nan
    d = float(np.quantile(a, q) - np.quantile(b, q))
    if len(a) < 2 or len(b) < 2:
        return d, np.nan, np.nan
    rng = np.random.default_rng(BOOTSTRAP_SEED)
    diffs = _resampled_quantiles(a, q, rng) - _resampled_quantiles(b, q, rng)
    low, high = np.quantile(diffs, [0.5 - confidence / 2, 0.5 + confidence / 2])
    return d, float(low), float(high)


def _resampled_quantiles(x: np.ndarray, q: float, rng, chunk: int = 200) -> np.ndarray:
    """The q-quantile of BOOTSTRAP_RESAMPLES resamples of x (in chunks: bounded memory)."""
    out = []
    for start in range(0, BOOTSTRAP_RESAMPLES, chunk):
        rows = min(chunk, BOOTSTRAP_RESAMPLES - start)
        out.append(np.quantile(x[rng.integers(0, len(x), size=(rows, len(x)))], q, axis=1))
    return np.concatenate(out)


def rate_ratio(count: float, counts, confidence: float = 0.95) -> tuple[float, float, float]:
    """(ratio, low, high) of one run's `count` to the mean of `counts` (one per run).

    Given the total, the one run's share of it is Binomial(total, 1 / (n + 1)) when both come
    from the same Poisson rate; the Clopper-Pearson interval of that share gives the ratio's
    interval. Counts are divided by the runs' dispersion (variance / mean) when it is above 1.
    Both sides zero: nothing to compare, (NaN, 0, inf), which contains 1."""
    runs = _finite(counts)
    n = len(runs)
    if n == 0 or not math.isfinite(count):
        return np.nan, np.nan, np.nan
    total = float(runs.sum())
    mean = total / n
    dispersion = float(runs.var(ddof=1)) / mean if n > 1 and mean > 0 else 1.0
    scale = max(dispersion, 1.0)
    x, s = count / scale, total / scale
    alpha = 1 - confidence
    low_share = 0.0 if x == 0 else float(stats.beta.ppf(alpha / 2, x, s + 1))
    high_share = 1.0 if s == 0 else float(stats.beta.ppf(1 - alpha / 2, x + 1, s))
    ratio = np.nan if total == 0 else count / mean
    if total == 0 and count > 0:
        ratio = np.inf
    return ratio, _ratio(low_share, n), _ratio(high_share, n)


def _ratio(share: float, n: int) -> float:
    """The rate ratio a share of the pooled count means: share / (1 - share) x n."""
    return np.inf if share >= 1 else n * share / (1 - share)


def excludes(low: float, high: float, value: float) -> bool:
    """The interval [low, high] is defined and leaves `value` out."""
    return bool(np.isfinite(low) or np.isfinite(high)) and not (low <= value <= high)
