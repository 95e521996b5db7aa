"""sim.comparisons.two_sample: each difference interval covers no-difference as often as its
confidence says when both samples come from one distribution (seeded trials, judged with a binomial
interval), and leaves it out when the difference is the issue's (live 22 double claims, simulated
0)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from sim.comparisons.two_sample import excludes, mean_difference, quantile_difference, rate_ratio

TRIALS = 400


def _false_alarms(trial, trials: int = TRIALS) -> int:
    return sum(trial(np.random.default_rng(seed)) for seed in range(trials))


def _at_most_about(alarms: int, alpha: float, trials: int = TRIALS) -> None:
    """False alarms no more often than alpha, within a 99.9% binomial allowance."""
    assert alarms <= stats.binom.ppf(0.999, trials, alpha), alarms


def test_mean_difference_is_welchs_interval():
    d, low, high = mean_difference([1.0, 2.0, 3.0, 4.0], [2.0, 4.0, 6.0])
    welch = stats.ttest_ind([1.0, 2.0, 3.0, 4.0], [2.0, 4.0, 6.0], equal_var=False)
    ci = welch.confidence_interval(0.95)
    assert (d, low, high) == pytest.approx((-1.5, ci.low, ci.high))
    assert np.isnan(mean_difference([1.0], [2.0, 3.0])[1])  # one live value: no interval
    assert mean_difference([2.0, 2.0], [2.0, 2.0]) == (0.0, 0.0, 0.0)


def test_mean_difference_rarely_calls_one_distribution_different():
    def trial(rng):
        _, low, high = mean_difference(rng.exponential(2, 40), rng.exponential(2, 800), 0.95)
        return excludes(low, high, 0.0)

    _at_most_about(_false_alarms(trial), 0.05)


def test_quantile_difference_rarely_calls_one_distribution_different_and_sees_a_shift():
    def trial(rng):
        _, low, high = quantile_difference(rng.exponential(2, 40), rng.exponential(2, 200), 0.9)
        return excludes(low, high, 0.0)

    _at_most_about(_false_alarms(trial, 150), 0.05, 150)  # each trial resamples 2000 times
    rng = np.random.default_rng(7)
    d, low, high = quantile_difference(rng.exponential(2, 200) + 2, rng.exponential(2, 400), 0.5)
    assert low > 0 and low <= d <= high
    assert quantile_difference([1.0, 2.0], [1.0, 2.0], 0.5) == quantile_difference(
        [1.0, 2.0], [1.0, 2.0], 0.5
    )  # a stream of its own: the same samples, the same interval


def test_rate_ratio_of_the_issues_double_claims_excludes_one():
    """Live 22 double claims; 20 simulated runs with none: the ratio is infinite and its interval
    far above 1. One live double claim against none is not enough to tell (p about 0.1)."""
    ratio, low, high = rate_ratio(22, [0] * 20)
    assert ratio == np.inf and low > 50 and excludes(low, high, 1.0)
    assert not excludes(*rate_ratio(1, [0] * 20)[1:], 1.0)
    assert not excludes(*rate_ratio(0, [0] * 20)[1:], 1.0)  # both zero: nothing to tell
    ratio, low, high = rate_ratio(9, [10, 10, 12, 5, 8])
    assert ratio == pytest.approx(1.0) and low < 1 < high


def test_rate_ratio_rarely_calls_one_poisson_rate_different():
    def trial(rng):
        _, low, high = rate_ratio(rng.poisson(3.0), rng.poisson(3.0, 20), 0.95)
        return excludes(low, high, 1.0)

    _at_most_about(_false_alarms(trial), 0.05)


def test_rate_ratio_allows_runs_that_spread_more_than_poisson():
    """Counts with four times Poisson's variance (negative binomial, mean 8): scaled by the
    runs' own dispersion, the test still calls them different no more than its 5%."""

    def draw(rng, size=None):
        return rng.negative_binomial(8 / 3, 1 / 4, size)  # mean 8, variance 32

    def trial(rng):
        _, low, high = rate_ratio(draw(rng), draw(rng, 20), 0.95)
        return excludes(low, high, 1.0)

    _at_most_about(_false_alarms(trial), 0.05)
