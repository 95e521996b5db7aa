"""sim.support.scipy_steps' normal, Student-t and chi-squared quantiles give scipy.stats' numbers
exactly, so that the sweeps' intervals, the advice's evidence and its report (a lognormal Dist's
quantile) need no scipy.stats (a second or more to import, issue 37)."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
from scipy import stats

from sim.scenario.dists import Dist
from sim.support import scipy_steps


def test_the_quantiles_are_scipy_stats_numbers_exactly():
    rng = np.random.default_rng(11)
    for _ in range(300):
        q = float(rng.uniform(0, 1))
        assert scipy_steps.norm_ppf(q) == stats.norm.ppf(q)
        df = np.array([np.nan, 0.0, 1.0, 2.0, *rng.integers(1, 10**6, 10)], dtype=float)
        assert np.array_equal(scipy_steps.t_ppf(q, df), stats.t.ppf(q, df), equal_nan=True)
        one = float(rng.integers(1, 5000))
        assert scipy_steps.t_ppf(q, one) == stats.t.ppf(q, one)
        k = int(rng.integers(1, 2000))
        assert scipy_steps.chi2_ppf(q, 2 * k) == stats.chi2.ppf(q, 2 * k)


def test_the_sweeps_intervals_the_evidence_and_lognormal_quantiles_import_no_scipy_stats():
    code = (
        "import json, sys\n"
        "import sim.sweeps\n"
        "from sim.advice.sensitivity import poisson_interval\n"
        "from sim.scenario.dists import Dist\n"
        "from sim.theory.stats import mean_ci, pooled_mean_ci, wilson_interval\n"
        "got = [mean_ci([1.0, 2.0, 4.0])[1], wilson_interval(3, 100)[1], poisson_interval(4)[1],\n"
        "       pooled_mean_ci([20, 20], [1.0, 2.0], [0.5, 0.7])[2],\n"
        "       Dist.lognormal(0.5, 5.0).quantile(0.999)]\n"
        "print(json.dumps([got, 'scipy.stats' in sys.modules]))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    got, imported = json.loads(done.stdout.splitlines()[-1])
    mean, sd, z = 7 / 3, np.std([1.0, 2.0, 4.0], ddof=1), stats.norm.ppf(0.975)
    assert got[0] == mean - stats.t.ppf(0.975, 2) * sd / np.sqrt(3)
    root = np.sqrt(0.03 * 0.97 / 100 + z * z / 40000)
    wilson = (0.03 + z * z / 200 + z * root) / (1 + z * z / 100)
    assert got[1] == pytest.approx(wilson, rel=1e-12)
    assert got[2] == stats.chi2.ppf(0.975, 10) / 2
    assert np.isfinite(got[3])
    assert got[4] == stats.lognorm.ppf(0.999, Dist.lognormal(0.5, 5.0).sigma, scale=0.5)
    assert imported is False
