"""The shortest timeout without renewal (sim.advice.queue_facts.no_renewal) is found by halving the
gap after its geometric grid (issue 37): the timeout every whole second of the gap would give,
from a dozen timeouts priced instead of thousands for hour-long jobs (milliseconds read as
seconds took minutes)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import sim
from sim.advice import queue_facts
from sim.scenario.settings import LeaseWarning


def priced_timeouts(monkeypatch, advice):
    """(no_renewal(advice), the timeouts it priced: one list a call)."""
    calls: list[list[float]] = []
    model = type(advice.model)
    price = model.priced

    def counted(self, ttls, *args, **kwargs):
        calls.append(list(ttls))
        return price(self, ttls, *args, **kwargs)

    monkeypatch.setattr(model, "priced", counted)
    found = queue_facts._no_renewal(advice)
    monkeypatch.undo()
    return found, calls


def priced(advice, ttls):
    """The no-renewal rows of these timeouts, as no_renewal prices them."""
    rows, _ = advice.model.priced(
        [float(t) for t in ttls],
        [None],
        [advice.watcher_interval],
        advice.target_false_expiry,
        advice.inputs,
    )
    return rows


def passing(advice, grid: list[float]):
    """passes(rows): each row's timeout feasible (when one of the grid is), else within
    FLOOR_TOLERANCE of the lowest upper bound on the grid."""
    rows = priced(advice, grid)
    feasible = bool(rows["feasible"].any())
    reach = float(rows["predicted_false_expiry_high"].min()) * (1 + queue_facts.FLOOR_TOLERANCE)

    def passes(frame):
        said = frame["feasible"] if feasible else frame["predicted_false_expiry_high"] <= reach
        return said.to_numpy(bool)

    return passes


def every_second(advice, grid: list[float]) -> float:
    """The first timeout that passes, trying every whole second between the last grid timeout that
    fails and the first that passes (the search before halving)."""
    passes = passing(advice, grid)
    first = int(np.argmax(passes(priced(advice, grid))))
    start = int(grid[first - 1]) + 1 if first else int(grid[0])
    fine = priced(advice, range(start, int(grid[first]) + 1))
    return float(fine["ttl"].iloc[int(np.argmax(passes(fine)))])


@pytest.mark.parametrize("target", [1e-3, 0.05], ids=["floor", "feasible"])
def test_halving_finds_the_timeout_every_second_finds(monkeypatch, target):
    """The sample: no timeout is provably under 0.1% (the shortest near the floor, 119 s), and at a
    5% target one below the longest job (117 s) is feasible; both as every second finds them."""
    advice = sim.advise("sample", arrival_rate=1, verify=False, target_false_expiry=target)
    found, calls = priced_timeouts(monkeypatch, advice)
    assert found.ttl == every_second(advice, calls[0])
    assert found.feasible is (target == 0.05)
    assert found.ttl == 119.0 if target == 1e-3 else found.ttl < 117
    assert len(calls[0]) <= queue_facts.GRID_POINTS
    assert all(len(c) == 1 for c in calls[1:])


def test_hour_long_jobs_price_a_few_dozen_timeouts_not_every_second(monkeypatch, bimodal_csv):
    """The bimodal export's milliseconds read as seconds (jobs of 35 min median, up to ~28 h): the
    gap after the grid is thousands of seconds wide; halving prices one timeout per halving, and
    the one found passes where one second shorter does not."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LeaseWarning)
        advice = sim.advise(bimodal_csv, column="duration_ms", verify=False)
    found, calls = priced_timeouts(monkeypatch, advice)
    grid = calls[0]
    gap = max(b - a for a, b in zip(grid, grid[1:], strict=False))
    assert gap > 1000
    assert sum(len(c) for c in calls[1:]) <= np.ceil(np.log2(gap)) + 1
    passes = passing(advice, grid)
    assert list(passes(priced(advice, [found.ttl - 1, found.ttl]))) == [False, True]
