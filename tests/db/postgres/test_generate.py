"""The equivalence suite's generator reaches the fidelity settings of issue #16: in 150
derandomized examples (as many as test_equivalence runs on both backends, though hypothesis seeds
each test function its own way), each setting is drawn and its mechanism actually acts: the
watcher's gap requeues, a backoff delays a requeued job, a deadline fires, a graceful stop releases,
a claim reaches the attempts cap, a background completion's effect commits before its completion. Memory backend only; the equivalence test compares both."""

from __future__ import annotations

import warnings
from collections import Counter

from hypothesis import HealthCheck, given, settings

import sim

from .generate import scenarios

SEEN: Counter = Counter()


@settings(
    max_examples=150,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(scenario=scenarios())
def _tally(scenario):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        run = sim.run(scenario, backend="memory", progress=False)
    kinds = Counter(e.kind for e in run.log)
    p, f = scenario.policy, scenario.faults
    SEEN["gap watcher requeued"] += bool(p.watcher and p.watcher_gap and kinds["requeue"])
    SEEN["backoff requeued"] += bool(p.retry_backoff and kinds["requeue"])
    SEEN["deadline fired"] += bool(kinds["deadline"])
    SEEN["graceful release"] += bool(f.shutdown == "graceful" and kinds["release"])
    SEEN["claim at the cap"] += any(
        e.kind == "claim" and e.attempt == p.max_attempts for e in run.log
    )
    SEEN["background completion"] += bool(p.completion == "background" and kinds["complete"])


def test_the_generated_scenarios_exercise_every_fidelity_setting():
    SEEN.clear()
    _tally()
    assert (
        min(
            SEEN[k]
            for k in (
                "gap watcher requeued",
                "backoff requeued",
                "deadline fired",
                "graceful release",
                "claim at the cap",
                "background completion",
            )
        )
        >= 5
    ), dict(SEEN)
