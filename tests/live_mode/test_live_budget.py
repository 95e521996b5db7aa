"""The time-scale guard and the run's watch on its own delays (sim.live_mode.budget), without a
server: the refusal line from measured figures, the share of late restarts against the runner's
spare mechanics simulated event by event, and the reasons a run is marked unsound."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from sim.errors import ConfigError
from sim.live_mode.budget import (
    LATE_SHARE,
    Measured,
    bound,
    check_scale,
    late_restart_share,
    shortest_interval,
    smallest_sound_scale,
    watch,
)
from sim.live_mode.settings import hand_check
from sim.scenario.dists import Dist
from sim.scenario.settings import Faults, ScriptedCrash, preset
from tests.model.scripts import scripted


def _measured(read: float, start: float = math.nan) -> Measured:
    return Measured(
        {"select_candidates": read, "claim_conditional": 0.0009, "requeue_expired": 0.0005},
        {"select_candidates": 200, "claim_conditional": 180, "requeue_expired": 40},
        clients=5,
        jobs=5000,
        replacement_start=start,
        replacements=2,
    )


def test_the_loaded_table_is_refused_where_the_empty_one_passed():
    """The issue's figures: the claim's read takes 0.3 ms on the empty table (what the old guard
    timed: it passed --time-scale 0.1) and 2.6 ms with 5000 jobs loaded, and a replacement worker
    takes 2 s to start under load. At 0.1 the refusal names both and the smallest sound scale."""
    scenario = hand_check()
    assert shortest_interval(scenario) == ("policy.poll_interval", 0.2)
    check_scale(scenario.replace(faults=Faults()), 0.1, _measured(0.0003))  # the old guard's view
    with pytest.raises(ConfigError) as refused:
        check_scale(scenario, 0.1, _measured(0.0026, start=2.0))
    assert str(refused.value) == (
        "--time-scale 0.1: on the loaded table (5000 jobs, 5 clients at once) select_candidates "
        "takes 2.6 ms (median of 200), 26 ms of scenario time, 13.0% of policy.poll_interval "
        "0.2 s (over the bound of 5%); a replacement worker takes 2 s to start, so up to 89% of "
        "restarts would come late (over the bound of 10%): use --time-scale >= 0.71"
    )
    # 0.71: the restarts' bound, 2 s / (2 x 1 s + -ln(0.9) / (450 / 3600)) = 0.7035, rounded up;
    # the read alone would need 2.6 ms / (5% x 0.2 s) = 0.26
    measured = _measured(0.0026, start=2.0)
    assert smallest_sound_scale(scenario, measured) == 0.71
    check_scale(scenario, 0.71, measured)  # the scale it names is accepted
    check_scale(scenario, 1.0, measured)
    with pytest.raises(ConfigError, match=r"^--time-scale: must be a number > 0"):
        check_scale(scenario, 0.0, measured)


def test_a_slow_statement_alone_sets_the_smallest_scale():
    scenario = preset("crash-recovery")  # poll 2 s is its shortest interval; no replacement timed
    measured = _measured(0.004)
    with pytest.raises(ConfigError, match=r"over the bound of 5%\): use --time-scale >= 0.04$"):
        check_scale(scenario, 0.01, measured)
    check_scale(scenario, 0.04, measured)


def _late_share_by_events(rate, delay, start, horizon, rng) -> tuple[int, int]:
    """The runner's mechanics for one worker, event by event: killed at Poisson times while up,
    its spare takes over due `delay` later, a new spare starts at the kill and is ready `start`
    later; a restart is late when its spare was not ready when due. (late, restarts)."""
    t, spare_ready, late, restarts = 0.0, 0.0, 0, 0
    while True:
        t += rng.exponential(1 / rate)  # the worker is up: its next kill
        if t >= horizon:
            return late, restarts
        due = t + delay
        restarts += 1
        late += spare_ready > due
        up = max(due, spare_ready)
        spare_ready = t + start  # the next spare starts at this kill
        t = up


@pytest.mark.parametrize(
    ("start", "delay", "near"),
    [(2.6, 1.0, True), (1.0, 1.0, True), (6.0, 0.5, False)],
    ids=["near the bound", "never late", "often late"],
)
def test_late_restart_share_bounds_the_spare_mechanics(start, delay, near):
    """The predicted share is never below the share the mechanics give (99.9% interval), and
    where late restarts are rare (the guard's bound is 10%) it is that share."""
    scenario = hand_check(**{"faults.restart_delay": Dist.constant(delay)})
    rate = scenario.faults.crash_rate / 3600
    late, restarts = _late_share_by_events(rate, delay, start, 2e5, np.random.default_rng(24))
    predicted = late_restart_share(scenario, 1.0, start)
    low, high = stats.binomtest(late, restarts).proportion_ci(0.999)
    assert low <= predicted, (late, restarts, predicted)
    if near:
        assert predicted <= high, (late, restarts, predicted)


def test_scripted_kills_too_close_together_come_late():
    """w0 killed at 1, 2 and 10 s, restart delay 0.5 s, a replacement ready 1 s after a kill:
    the kill at 2 s needs a replacement started at 1 s by 2.5 s (in time); ready 2 s after a
    kill, it is late: 1 of 3 restarts, over 10%, so the smallest sound scale makes a replacement
    ready within 1 s + 0.5 s of a kill: 1 s / 1.5 s, rounded up."""
    crashes = tuple(ScriptedCrash(at=t, worker=0) for t in (1.0, 2.0, 10.0))
    scenario = scripted(workers=1, faults=Faults(crashes=crashes, restart_delay=Dist.constant(0.5)))
    assert late_restart_share(scenario, 1.0, 1.0) == 0.0
    assert late_restart_share(scenario, 1.0, 2.0) == pytest.approx(1 / 3)
    measured = Measured({"claim_conditional": 0.0001}, {"claim_conditional": 50}, 1, 1, 1.0, 1)
    assert smallest_sound_scale(scenario, measured) == 0.67
    assert late_restart_share(scenario, 0.67, 1.0) == 0.0


def test_watch_names_a_statement_whose_median_drifted_past_its_bound():
    """select_candidates takes 1 ms for 20 s, then 15 ms: the window from 20 s to 30 s is past
    the 10 ms bound (5% of the 0.2 s poll interval at scale 1); the other statement is not."""
    scenario = hand_check()
    rng = np.random.default_rng(1)
    statements = [(t, "select_candidates", 0.001) for t in rng.uniform(0, 20, 200)]
    statements += [(t, "select_candidates", 0.015) for t in rng.uniform(20, 30, 100)]
    statements += [(t, "heartbeat", 0.002) for t in rng.uniform(0, 30, 300)]
    assert watch(scenario, 1.0, statements, [], []) == [
        "statement latency: select_candidates took 15 ms (median of 100) from 20 s to 30 s, "
        "15 ms of scenario time, over the bound of 10 ms (5% of policy.poll_interval 0.2 s)"
    ]
    assert watch(scenario, 1.0, statements[:200] + statements[300:], [], []) == []
    # at --time-scale 2 the same wall latency is half as much scenario time: within the bound
    doubled = [(t / 2, name, s) for t, name, s in statements]
    assert watch(scenario, 2.0, doubled, [], []) == []


def test_watch_names_late_restarts_and_late_fault_actions_beyond_their_share():
    """Restarts are late past 5% of the 1 s restart delay (50 ms), fault actions past 5% of the
    0.2 s poll interval (10 ms); one late in ten is allowed, two are not."""
    scenario = hand_check()
    _, _, limit = bound(scenario)
    assert limit == pytest.approx(0.01)
    on_time = [0.001] * 9
    assert watch(scenario, 1.0, [], on_time + [0.5], [0.002] * 9 + [0.05]) == []  # 10%: allowed
    assert watch(scenario, 1.0, [], on_time[:8] + [0.04, 0.045], []) == []  # within 50 ms
    reasons = watch(scenario, 1.0, [], on_time[:8] + [0.5, 1.9], [0.002] * 8 + [0.05, 0.2])
    assert reasons == [
        "restart lag: 2 of 10 restarts came later than 50 ms (5% of faults.restart_delay 1 s), "
        f"the latest by 1.9 s; at most {LATE_SHARE:.0%} may",
        "scheduler delay: 2 of 10 fault actions came later than 10 ms (5% of "
        "policy.poll_interval 0.2 s), the latest by 200 ms; at most 10% may",
    ]
    # at --time-scale 0.1 the same wall delay of a fault action is ten times the scenario time
    assert watch(scenario, 0.1, [], [], [0.002] * 10)[0].startswith(
        "scheduler delay: 10 of 10 fault actions came later than 10 ms"
    )
