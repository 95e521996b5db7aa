"""Samplers: the same values as drawing one at a time from the stream, across block boundaries."""

import math

import numpy as np
import pytest

from sim.scenario.dists import Dist, blocks

N = 1300  # past the growing first blocks (8 ... 256 values) and more than one block of 512


@pytest.mark.parametrize(
    ("dist", "direct"),
    [
        (Dist.exponential(2.0), lambda rng: rng.exponential(2.0)),
        (Dist.uniform(1.0, 3.0), lambda rng: rng.uniform(1.0, 3.0)),
        (
            Dist.lognormal(1.0, 5.0),
            lambda rng: rng.lognormal(0.0, math.log(5.0) / 2.3263478740408408),
        ),
        (Dist.pareto(0.5, 2.5), lambda rng: 0.5 * (1.0 + rng.pareto(2.5))),
    ],
)
def test_sampler_draws_the_one_at_a_time_sequence(dist, direct):
    draw = dist.sampler(np.random.default_rng(7))
    got = [draw() for _ in range(N)]
    rng = np.random.default_rng(7)
    expected = [float(direct(rng)) for _ in range(N)]
    assert got == pytest.approx(expected, rel=1e-12)
    assert all(type(x) is float for x in got)


def test_empirical_resamples_the_given_values():
    draw = Dist.empirical([1.0, 2.0, 4.0]).sampler(np.random.default_rng(3))
    got = [draw() for _ in range(N)]
    rng = np.random.default_rng(3)
    assert got == [[1.0, 2.0, 4.0][int(rng.integers(0, 3))] for _ in range(N)]


def test_constant_sampler_never_draws():
    rng = np.random.default_rng(1)
    draw = Dist.constant(0.25).sampler(rng)
    assert [draw() for _ in range(3)] == [0.25, 0.25, 0.25]
    assert rng.random() == np.random.default_rng(1).random()  # the stream was left untouched


def test_blocks_of_integers_match_scalar_draws():
    stream = blocks(np.random.default_rng(5).integers, 100, 100_000)
    rng = np.random.default_rng(5)
    assert [next(stream) for _ in range(N)] == [int(rng.integers(100, 100_000)) for _ in range(N)]


def test_a_short_run_draws_only_a_first_small_block():
    """Three values of a stream cost one block of 8 draws, not 512: the stream's generator is
    where one that drew 8 values one at a time is."""
    rng = np.random.default_rng(9)
    draw = Dist.exponential(2.0).sampler(rng)
    assert [draw() for _ in range(3)] == pytest.approx(
        [float(x) for x in np.random.default_rng(9).exponential(2.0, 3)], rel=1e-12
    )
    reference = np.random.default_rng(9)
    reference.exponential(2.0, 8)
    assert rng.random() == reference.random()
