"""The hunt's hot path says what sim.check says: on runs of the presets under generated schedules,
the fast screen (sim.hunting.verdict) with the early stop, the screen over the whole horizon and
sim.check on `sim run`'s replay of the scenario file name the same broken invariants. A
certificate counts the schedules the screen found clean, so this agreement is what makes it
honest."""

from __future__ import annotations

import itertools
import warnings

import pytest

from sim.hunting.grid import Grid
from sim.hunting.runner import _settle_time, execute, replay
from sim.hunting.space import Fault, make_scope
from sim.hunting.strategies import Sampler
from sim.scenario.settings import preset

# presets that exercise every mechanism the screen reads: read-then-write races, zombies with
# and without fencing, dedup and redelivery, a read-then-write watcher, process liveness, a
# two-phase stall check, an execution timeout
PRESETS = {
    "baseline": {"policy.fencing": False},
    "read-then-write-race": {},
    "gc-pause-zombie": {},
    "duplicate-delivery": {},
    "river": {"policy.lease_ttl": 20.0, "policy.watcher_gap": 0.5},
    "solid-queue": {},
    "bullmq": {},
    "temporal": {},
}


def corpus(name: str):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # risky settings on purpose
        scenario = preset(name).with_overrides(PRESETS[name])
    scope = make_scope(scenario, workers=2, jobs=2, max_faults=3)
    sampler = Sampler(scope, seed=5)
    schedules = [sampler.swarm(i) for i in range(4)] + [sampler.pct(i) for i in range(2)]
    schedules += list(itertools.islice(iter(Grid(scope)), 10, 13))  # past the roots: one fault
    return scope, schedules


@pytest.mark.parametrize("name", list(PRESETS))
def test_the_screen_the_early_stop_and_sim_check_agree(name):
    scope, schedules = corpus(name)
    seen = set()
    for schedule in schedules:
        early = execute(scope, schedule)
        whole = execute(scope, schedule, early=False)
        judged = replay(scope, schedule)
        assert early.broken == whole.broken, schedule.lines()
        assert set(whole.broken) == set(judged.broken), schedule.lines()
        assert early.stopped_at <= whole.stopped_at == schedule.horizon
        seen |= set(judged.broken)
    if name == "read-then-write-race":  # the corpus does break things: the agreement is not vacuous
        assert {"double_claim", "duplicate_db_effect"} <= seen


def test_a_settled_run_stops_early_with_the_verdict_of_the_whole_horizon():
    scope = make_scope(preset("baseline"), workers=2, jobs=2)
    schedule = scope.default()
    early = execute(scope, schedule, record=True)
    whole = execute(scope, schedule, early=False)
    assert not early.broken and not whole.broken
    # two 1 s jobs are done by ~3 s; the monitor looks every horizon/16, finds it settled at the
    # first look and stops a read-to-write gap later
    assert early.stopped_at == pytest.approx(scope.horizon / 16 + _settle_time(scope.base))
    assert whole.stopped_at == scope.horizon
    assert early.records < whole.records


def test_a_run_that_never_settles_goes_to_the_horizon():
    """w0 is paused holding its job until the end: nothing settles, the run goes to the horizon
    and says what the whole run says."""
    scope = make_scope(preset("baseline"), workers=1, jobs=1)
    schedule = scope.default(1, 1)
    pause = Fault("pause", 0, 0.5, scope.horizon - 0.5)
    schedule = type(schedule)(**{**schedule.__dict__, "faults": (pause,)})
    outcome = execute(scope, schedule)
    assert outcome.stopped_at == scope.horizon
    assert outcome.broken == replay(scope, schedule).broken
