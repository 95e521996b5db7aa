"""The bounded grid (roots, anchors, children, levels) and the random strategies (swarm, PCT):
exact where the runs are scripted, deterministic per seed, statistical where they draw."""

from __future__ import annotations

import itertools
import time

import pytest

from sim.hunting.grid import Grid, anchors, children, configurations
from sim.hunting.space import Fault, make_scope
from sim.hunting.strategies import PCT_DEPTH, Sampler, candidates
from sim.scenario.settings import preset
from sim.theory.stats import wilson_interval
from tests.model.scripts import scripted


def one_job_scope(**kw):
    """One worker, one 5 s job, an 8 s lease, a watcher every 10 s, 1 ms statements."""
    scenario = scripted(
        work=5, horizon=40, watcher=True, watcher_interval=10.0, lease_ttl=8.0, heartbeat=False
    )
    return make_scope(scenario, workers=1, jobs=1, max_faults=1, **kw)


def test_the_roots_are_every_size_both_phase_patterns_and_each_tie_order():
    scope = make_scope(preset("baseline"), workers=2, jobs=2)
    roots = [(r.workers, r.jobs, r.phases, r.order) for r in configurations(scope)]
    assert roots == [
        (1, 1, (0.0,), ()),
        (1, 2, (0.0,), ()),
        (2, 1, (0.0, 0.0), ("w0",)),
        (2, 1, (0.0, 0.5), ("w0",)),
        (2, 1, (0.0, 0.5), ("w1",)),
        (2, 2, (0.0, 0.0), ("w0",)),
        (2, 2, (0.0, 0.5), ("w0",)),
        (2, 2, (0.0, 0.5), ("w1",)),
    ]


def test_anchors_are_where_the_run_acts():
    """w0 reads and claims at 0 and 0.001 (sent), works 5 s, sends its completion's three
    statements from 5.002; its lease would end at 8.002. Idle polls are no actions."""
    scope = one_job_scope(kinds=["crash", "pause"])
    where = anchors(scope, configurations(scope)[0])
    assert [(a.client, a.sends) for a in where.actions] == [
        ("w0", (0.0, 0.001)),
        ("w0", (5.002, 5.003, pytest.approx(5.004))),
    ]
    assert where.claims == ((0, 0.002),) and where.expiries == (8.002,)


def test_the_children_of_a_root_are_anchored_on_its_run():
    """Crashes half a latency either side of each of w0's statements; pauses from just after its
    claim or just before its completion, until just after its lease expires or just after the
    watcher requeues the job (10.001 + epsilon in the run where the pause never ends)."""
    scope = one_job_scope(kinds=["crash", "pause"])
    faults = [c.faults for c in children(scope, configurations(scope)[0])]
    assert faults == [
        *[(Fault("crash", 0, t),) for t in (0.0005, 0.0015, 5.0015, 5.0025, 5.0035, 5.0045)],
        (Fault("pause", 0, 0.0025, 8.0),),
        (Fault("pause", 0, 0.0025, 9.999),),
        (Fault("pause", 0, 5.0015, 3.001),),
        (Fault("pause", 0, 5.0015, 5.0),),
    ]


def test_a_second_fault_comes_no_earlier_than_the_first():
    scope = one_job_scope(kinds=["crash", "pause"])
    first = children(scope, configurations(scope)[0])[6]  # the pause from 0.0025 for 8 s
    later = children(scope, first)
    assert later and all(len(c.faults) == 2 for c in later)
    assert all(min(f.at for f in c.faults) == 0.0025 for c in later)
    assert all(max(f.at for f in c.faults) >= 0.0025 for c in later)


def test_the_grid_is_walked_a_level_at_a_time_and_is_the_same_every_time():
    scope = make_scope(preset("baseline"), workers=2, jobs=1, max_faults=1)
    first, again = Grid(scope), Grid(scope)
    assert list(first) == list(again)
    assert first.sizes == again.sizes and len(first.sizes) == 2
    assert first.sizes[0] == len(first.roots) == 4
    assert [len(s.faults) for s in first] == sorted(len(s.faults) for s in first)


def test_a_grid_past_its_deadline_stops_growing_and_says_so():
    scope = make_scope(preset("baseline"), workers=2, jobs=1, max_faults=2)
    grid = Grid(scope)
    grid.deadline = time.perf_counter() - 1
    schedules = list(grid)
    # the roots, then nothing more grows: only the roots' level is known
    assert grid.cut and grid.done and schedules == grid.roots and grid.sizes == [len(grid.roots)]


# ---- the random strategies ------------------------------------------------------------------


def test_candidates_start_with_the_roots_then_take_turns():
    scope = make_scope(preset("baseline"), workers=2, jobs=1, max_faults=1)
    grid = Grid(scope)
    first = list(itertools.islice(candidates(scope, 3, grid, exhaustive=False), 12))
    assert [s for _, s in first[:4]] == grid.roots
    assert [strategy for strategy, _ in first[4:12]] == ["swarm", "pct"] + [
        "grid",
        "grid",
        "swarm",
        "pct",
    ] + ["grid", "grid"]


def test_the_random_strategies_are_a_function_of_seed_and_number():
    scope = make_scope(preset("baseline"), workers=2, jobs=2, max_faults=3)
    a, b, other = Sampler(scope, 7), Sampler(scope, 7), Sampler(scope, 8)
    assert [a.swarm(i) for i in range(20)] == [b.swarm(i) for i in range(20)]
    assert [a.pct(i) for i in range(20)] == [b.pct(i) for i in range(20)]
    assert [a.swarm(i) for i in range(20)] != [other.swarm(i) for i in range(20)]


def test_swarm_gives_each_kind_to_half_the_candidates():
    """Each candidate draws its own subset of kinds, each kind with probability 1/2 (Groce et al.):
    over 2000 draws every kind's share has a 99% Wilson interval around 0.5."""
    scope = make_scope(preset("baseline"), workers=2, jobs=2, max_faults=3)
    sampler = Sampler(scope, 1)
    draws = [sampler.kinds(sampler.rng(1, i)) for i in range(2000)]
    for kind in scope.kinds:
        low, high = wilson_interval(sum(kind in d for d in draws), len(draws), 0.99)
        assert low < 0.5 < high, kind
    assert len({tuple(d) for d in draws}) > 100  # subsets, not all kinds at once


def test_pct_orders_the_clients_and_puts_its_change_points_among_the_ties():
    scope = make_scope(preset("baseline"), workers=2, jobs=2, max_faults=3)
    sampler = Sampler(scope, 2)
    for i in range(30):
        s = sampler.pct(i)
        clients = {f"w{k}" for k in range(s.workers)} | {"watcher"}
        clients |= {f"w{k}/hb" for k in range(s.workers)}
        assert set(s.order) == clients and len(s.order) == len(clients)
        ties = sampler._anchors(s.workers, s.jobs).ties
        assert 1 <= len(s.changes) <= PCT_DEPTH - 1
        assert all(1 <= k <= max(ties, 1) for k in s.changes)
