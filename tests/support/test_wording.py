"""Counts in words: the noun agrees with the number."""

import numpy as np

from sim.support.in_words import count, times


def test_count_is_singular_for_exactly_one():
    assert [count(n, "crash", "crashes") for n in (0, 1, 2, 0.5, 1.0, np.int64(1))] == [
        "0 crashes",
        "1 crash",
        "2 crashes",
        "0.5 crashes",
        "1 crash",
        "1 crash",
    ]
    assert count(3000.0, "job") == "3000 jobs"


def test_times_says_once_and_twice():
    assert [times(n) for n in (1, 2, 3, 0.5)] == ["once", "twice", "3 times", "0.5 times"]


def test_percent_of_a_whole_reads_100_not_1e02():
    from sim.support.in_words import percent

    assert [percent(x) for x in (1.0, 0.999, 0.5, 0.0123, 2.5)] == [
        "100%",
        "100%",
        "50%",
        "1.2%",
        "250%",
    ]
