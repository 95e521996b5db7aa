"""scipy.stats' lognormal and Poisson laws, the beta, normal, Student-t and chi-squared quantiles
and scipy.signal's fftconvolve, done by the same steps on scipy.special and scipy.fft (and so to
the same numbers: tests compare them), without importing scipy.stats or scipy.signal: each takes a
second or more to import, and `python -m sim advise` answers before it would have finished."""

from __future__ import annotations

import numpy as np
from scipy import fft, special


def scipy_stats():
    """scipy.stats, imported on first use: it takes a second or more to import, and the kinds the
    advice meets (lognormal, empirical, constant) are computed below without it."""
    from scipy import stats

    return stats


def lognormal_cdf(x, sigma: float, median: float) -> np.ndarray:
    """scipy.stats.lognorm.cdf(x, sigma, scale=median)."""
    y = np.asarray(np.asarray(x, dtype=float) / median)
    out = np.where(np.isnan(y), np.nan, np.where(y >= np.inf, 1.0, 0.0))
    inside = (y > 0) & (y < np.inf)
    if inside.any():
        out[inside] = special.ndtr(np.log(y[inside]) / sigma)
    return out[()] if out.ndim == 0 else out


def lognormal_ppf(q, sigma: float, median: float) -> np.ndarray:
    """scipy.stats.lognorm.ppf(q, sigma, scale=median), for 0 < q < 1."""
    return np.exp(sigma * special.ndtri(np.asarray(q, dtype=float))) * median + 0


def poisson_pmf(k, mu) -> np.ndarray:
    """scipy.stats.poisson.pmf(k, mu) for whole k >= 0 and mu >= 0."""
    return np.clip(np.exp(special.xlogy(k, mu) - special.gammaln(k + 1) - mu), 0, 1)


def poisson_ppf(q: float, mu: float) -> float:
    """scipy.stats.poisson.ppf(q, mu) for 0 < q < 1 and mu > 0."""
    vals = np.ceil(special.pdtrik(q, mu))
    vals1 = np.maximum(vals - 1, 0)
    return float(np.where(special.pdtr(vals1, mu) >= q, vals1, vals) + 0)


def beta_ppf(q: float, a: float, b: float) -> float:
    """scipy.stats.beta.ppf(q, a, b) for 0 < q < 1 and a, b > 0 (the ufunc it calls)."""
    from scipy.special import _ufuncs

    return float(_ufuncs._beta_ppf(q, a, b) * 1.0 + 0)


def norm_ppf(q):
    """scipy.stats.norm.ppf(q) for 0 < q < 1."""
    return special.ndtri(q) * 1.0 + 0


def t_ppf(q, df):
    """scipy.stats.t.ppf(q, df) for 0 < q < 1 (NaN where df is NaN or not above 0)."""
    df = np.asarray(df, dtype=float)
    return np.where(df > 0, special.stdtrit(np.where(df > 0, df, 1.0), q), np.nan)[()] * 1.0 + 0


def chi2_ppf(q, df):
    """scipy.stats.chi2.ppf(q, df) for 0 < q < 1 and df > 0."""
    return 2 * special.gammaincinv(np.asarray(df, dtype=float) / 2, q) * 1.0 + 0


def convolve(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """scipy.signal.fftconvolve(a, b) of two real 1-D arrays, the same steps and so the same
    numbers, without importing scipy.signal (a second or more at start-up)."""
    n = len(a) + len(b) - 1
    size = [fft.next_fast_len(n, True)]
    return fft.irfftn(fft.rfftn(a, size, axes=[0]) * fft.rfftn(b, size, axes=[0]), size, axes=[0])[
        :n
    ]
