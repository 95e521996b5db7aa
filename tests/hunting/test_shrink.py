"""Shrinking: smaller schedules to try, each kept only if the same invariant still breaks; the
result is a pure function of the schedule it starts from."""

from __future__ import annotations

from dataclasses import replace

from sim.hunting.runner import execute, replay
from sim.hunting.shrink import _down, _without_worker, shrink
from sim.hunting.space import Fault, Schedule, make_scope
from sim.scenario.settings import preset

UNFENCED = preset("baseline").with_overrides({"policy.fencing": False})
# what the grid finds on the unfenced baseline with two workers and two jobs: w0 pauses just
# before its completion, until just after w1 has taken its expired lease
ZOMBIE_PAUSE = Fault("pause", 0, 1.303, 29.074)


def breaks(scope, invariant):
    return lambda s: invariant in execute(scope, s).broken


def test_smaller_values_are_tried_smallest_first():
    assert _down(8.0, 0.5) == [0.0, 4.0, 6.0, 7.0, 7.5]
    assert _down(3.0, 1.0, floor=1.0) == [1.0, 2.0]
    assert _down(1.2, 0.5, floor=1.0) == []  # within epsilon of its floor already


def test_dropping_a_worker_renumbers_the_later_ones():
    s = Schedule(
        3,
        1,
        60.0,
        (0.0, 0.1, 0.2),
        0.0,
        (1.0,),
        (Fault("crash", 0, 1.0), Fault("pause", 1, 2.0, 3.0), Fault("crash", 2, 4.0)),
        ("w2", "w1/hb", "watcher", "w0"),
    )
    assert _without_worker(s, 1) == replace(
        s,
        workers=2,
        phases=(0.0, 0.2),
        faults=(Fault("crash", 0, 1.0), Fault("crash", 1, 4.0)),
        order=("w1", "watcher", "w0"),
    )


def test_a_noisy_failure_shrinks_to_one_pause_and_the_same_way_every_time():
    """The unfenced completion buried in noise (a second job, a late crash and partition of w1,
    a database stall after the fact, staggered phases): the shrinker keeps one pause of w0."""
    scope = make_scope(UNFENCED, workers=2, jobs=2, max_faults=4)
    noisy = Schedule(
        2,
        2,
        scope.horizon,
        (0.0, 0.0),
        0.0,
        (1.0, 1.0),
        tuple(
            sorted(
                (
                    ZOMBIE_PAUSE,
                    Fault("crash", 1, 60.0),
                    Fault("partition", 1, 45.0, 3.0),
                    Fault("db_stall", -1, 50.0, 2.0),
                )
            )
        ),
        ("w0",),
    )
    assert "non_owner_completion" in execute(scope, noisy).broken
    best, steps = shrink(noisy, breaks(scope, "non_owner_completion"), scope, seconds=60)
    again, _ = shrink(noisy, breaks(scope, "non_owner_completion"), scope, seconds=60)
    assert best == again
    assert (best.workers, best.jobs, [f.kind for f in best.faults]) == (2, 1, ["pause"])
    assert best.faults[0].worker == 0 and best.faults[0].duration < scope.base.policy.lease_ttl
    assert best.horizon < noisy.horizon and best.order == ()
    assert [s.schedule.size() for s in steps] == sorted(
        (s.schedule.size() for s in steps), reverse=True
    )
    assert "non_owner_completion" in replay(scope, best).broken  # sim.check agrees
