"""run_to_horizon without a bar runs the environment in one call, with a bar in 100 slices (one
per percent); both give the same run, events that fall on a slice's boundary included."""

from __future__ import annotations

from sim.db.memory import MemoryBackend
from sim.model.world import build, run_to_horizon
from sim.scenario.dists import Dist
from sim.scenario.settings import preset

# Round trips of 1 s, polls every 1 s from t=0 and a 100 s horizon: slice boundaries fall on
# whole seconds, where polls, round trips and their records fall.
ON_THE_BOUNDARIES = preset("crash-recovery").with_overrides(
    {
        "seed": 3,
        "horizon": 100.0,
        "policy.random_phase": False,
        "policy.poll_interval": 1.0,
        "workload.statement_latency": Dist.constant(1.0),
    }
)


def _run(progress: bool, monkeypatch) -> tuple[list, list[float]]:
    world = build(ON_THE_BOUNDARIES, MemoryBackend())
    calls: list[float] = []
    run = world.env.run
    monkeypatch.setattr(world.env, "run", lambda until: calls.append(until) or run(until=until))
    monkeypatch.setenv("LEASELAB_HEADLESS", "1")  # the bar (progress=True) is drawn, not watched
    run_to_horizon(world, progress=progress)
    return list(world.log), calls


def test_a_run_without_a_bar_is_one_call_and_the_same_run(monkeypatch):
    plain, one = _run(False, monkeypatch)
    sliced, hundred = _run(True, monkeypatch)
    assert one == [100.0]
    assert hundred == [float(i) for i in range(1, 101)]
    on_boundaries = [e for e in plain if e.t == int(e.t) and 0 < e.t < 100]
    assert len(on_boundaries) >= 20, "the scenario no longer puts events on slice boundaries"
    assert {e.kind for e in plain} >= {"claim", "complete", "crash", "idle"}
    assert plain == sliced
