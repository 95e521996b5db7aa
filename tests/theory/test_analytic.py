"""sim.theory.closed_forms's building blocks, exactly: CDFs, heartbeat counts, crash ages,
limits of the formulas."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from sim.scenario.dists import Dist
from sim.theory import closed_forms

DISTS = [
    Dist.constant(3.0),
    Dist.exponential(2.0),
    Dist.uniform(1.0, 5.0),
    Dist.lognormal(2.0, 20.0),
    Dist.pareto(1.0, 2.5),
    Dist.empirical([1.0, 2.0, 2.0, 7.0]),
]


@pytest.mark.parametrize("dist", DISTS, ids=lambda d: d.kind)
def test_cdf_agrees_with_the_quantile_function(dist):
    if dist.kind == "empirical":  # a step function: the fraction of samples <= x
        assert closed_forms.cdf(dist, [0.5, 1.0, 2.0, 6.9, 7.0]).tolist() == [
            0,
            0.25,
            0.75,
            0.75,
            1.0,
        ]
        return
    for q in (0.1, 0.5, 0.9):
        x = dist.quantile(q)
        assert closed_forms.cdf(dist, x) >= q - 1e-9
        assert closed_forms.cdf(dist, x - 1e-6) <= q + 1e-9
    assert closed_forms.survival(dist, -1.0) == 1.0
    assert closed_forms.cdf(dist, 1e9) == pytest.approx(1.0)


def test_heartbeats_per_job_counts_floor_of_t_over_cycle():
    assert (
        closed_forms.heartbeats_per_job(heartbeat_interval=10, job_duration=Dist.constant(35.0))
        == 3
    )
    assert (
        closed_forms.heartbeats_per_job(heartbeat_interval=10, job_duration=Dist.constant(9.0)) == 0
    )
    # with latency the k-th heartbeat is due at k h + (k - 1) latency
    assert (
        closed_forms.heartbeats_per_job(
            heartbeat_interval=10, job_duration=Dist.constant(30.01), latency=0.01
        )
        == 2
    )
    assert (
        closed_forms.heartbeats_per_job(
            heartbeat_interval=10, job_duration=Dist.constant(30.03), latency=0.01
        )
        == 3
    )
    # uniform(0, 20), h = 10: P(T > 10) = 0.5
    assert closed_forms.heartbeats_per_job(
        heartbeat_interval=10, job_duration=Dist.uniform(0, 20)
    ) == pytest.approx(0.5)


def test_time_since_renewal_limits():
    long = Dist.constant(1000.0)
    assert closed_forms.time_since_renewal_mean(long, heartbeat_interval=10) == pytest.approx(
        5.0
    )  # h'/2
    assert closed_forms.time_since_renewal_mean(
        Dist.constant(4.0), heartbeat_interval=10
    ) == pytest.approx(2.0)  # T/2
    assert closed_forms.time_since_renewal_mean(Dist.constant(30.0), ttl=20) == pytest.approx(
        (200 + 200) / 30
    )
    exp = Dist.exponential(
        5.0
    )  # memoryless: the age of an exponential renewal process is exponential too
    assert closed_forms.worked_at_crash_mean(exp) == pytest.approx(5.0, rel=0.01)
    draws = closed_forms.time_since_renewal_samples(
        200_000, Dist.lognormal(8, 30), heartbeat_interval=10, seed=3
    )
    assert draws.mean() == pytest.approx(
        closed_forms.time_since_renewal_mean(Dist.lognormal(8, 30), heartbeat_interval=10), rel=0.01
    )


def test_recovery_samples_use_the_time_since_renewal():
    since = closed_forms.time_since_renewal_samples(
        50_000, Dist.constant(4.0), heartbeat_interval=10, seed=1
    )
    draws = closed_forms.recovery_latency_samples(
        50_000, ttl=30, heartbeat_interval=None, poll_interval=2, worked_at_crash=since, seed=2
    )
    assert draws.mean() == pytest.approx(30 - 2 + 1, abs=0.05)
    assert (
        closed_forms.recovery_latency_cdf(
            30 - 4 - 1e-9, ttl=30, heartbeat_interval=None, poll_interval=2, worked_at_crash=4.0
        )
        == 0.0
    )


def test_false_expiry_with_heartbeats_is_one_minus_exp_of_lapsing_pause_rate():
    # constant pauses of 8 s, L = 10, h = 4: a pause lapses the lease iff its phase exceeds 2 s,
    # half the cycle
    p = closed_forms.false_expiry_probability(
        ttl=10,
        heartbeat_interval=4,
        job_duration=Dist.constant(40.0),
        pause_rate=36,
        pause_duration=Dist.constant(8.0),
    )
    assert p == pytest.approx(1 - math.exp(-0.01 * 40 * 0.5), rel=1e-3)
    # no pause ever outlasts L - h: no false expiry
    assert (
        closed_forms.false_expiry_probability(
            ttl=10,
            heartbeat_interval=4,
            job_duration=Dist.constant(40.0),
            pause_rate=36,
            pause_duration=Dist.constant(5.9),
        )
        == 0
    )


def test_false_expiry_without_heartbeat_is_compound_poisson():
    job, rate = Dist.constant(10.0), 360.0  # 0.1 pauses per second: Poisson(1) pauses per job
    # pauses of 6 s, L = 20: the lease lapses iff two or more pauses (10 + 12 > 20)
    p = closed_forms.false_expiry_probability(
        ttl=20,
        heartbeat_interval=None,
        job_duration=job,
        pause_rate=rate,
        pause_duration=Dist.constant(6.0),
    )
    assert p == pytest.approx(1 - stats.poisson.cdf(1, 1.0), abs=1e-3)
    # jobs longer than L always lapse
    lognormal = Dist.lognormal(10.0, 60.0)
    assert closed_forms.false_expiry_probability(
        ttl=40,
        heartbeat_interval=None,
        job_duration=lognormal,
        pause_rate=0,
        pause_duration=Dist.constant(1.0),
    ) == pytest.approx(float(closed_forms.survival(lognormal, 40.0)), rel=1e-6)
    # a heartbeat too slow to matter behaves like none
    assert closed_forms.false_expiry_probability(
        ttl=40,
        heartbeat_interval=45,
        job_duration=lognormal,
        pause_rate=0,
        pause_duration=Dist.constant(1.0),
    ) == pytest.approx(float(closed_forms.survival(lognormal, 40.0)), rel=1e-6)


def test_false_expiry_falls_as_ttl_grows():
    values = [
        closed_forms.false_expiry_probability(
            ttl=ttl,
            heartbeat_interval=5,
            job_duration=Dist.lognormal(20, 120),
            pause_rate=30,
            pause_duration=Dist.lognormal(2, 30),
        )
        for ttl in (10, 20, 40, 80)
    ]
    assert all(a > b for a, b in zip(values, values[1:], strict=False))
    assert np.all(np.asarray(values) > 0)


def test_the_tail_of_a_sum_and_its_quantile():
    lognormal = Dist.lognormal(15.0, 120.0)
    # with a constant second term the sum is a shifted lognormal
    assert closed_forms.sum_survival(lognormal, Dist.constant(2.0), 50.0, 0.5) == pytest.approx(
        float(closed_forms.survival(lognormal, 47.5)), rel=1e-9
    )
    x = closed_forms.sum_quantile(lognormal, Dist.constant(2.0), 1 - 1e-4, 0.5)
    assert x == pytest.approx(lognormal.quantile(1 - 1e-4) + 2.5, abs=2e-3)
    # a random second term only adds to the tail; the survival at the quantile is 1 - q
    psp = Dist.lognormal(0.3, 2.0)
    y = closed_forms.sum_quantile(lognormal, psp, 1 - 1e-4)
    assert y > lognormal.quantile(1 - 1e-4) and closed_forms.sum_survival(
        lognormal, psp, y
    ) == pytest.approx(1e-4, rel=1e-3)
    with pytest.raises(ValueError):
        closed_forms.sum_quantile(
            lognormal, psp, 1.0
        )  # no finite TTL: the lognormal has no largest value
