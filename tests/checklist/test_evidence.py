"""The review's runs: the variants run ahead of time, beside the scenario's own runs, are the very
runs the items would have built when they asked, and the items see them in the order they ask."""

from __future__ import annotations

from sim.checklist.evidence import Evidence
from sim.checklist.variants import ahead_of_time
from sim.scenario.settings import as_scenario


def test_variants_run_ahead_are_those_the_items_would_build():
    scenario = as_scenario("crash-recovery").with_overrides({"horizon": 60.0})
    gathered = Evidence.gathered(scenario, (1, 2), True, {})
    lazy = Evidence(scenario, gathered.runs, True, {})
    assert ahead_of_time(scenario) == ("contention", "no-heartbeat", "duplicates")
    assert gathered.variants == {}  # none is shown before an item asks for it
    for name in ("duplicates", "no-heartbeat", "contention"):
        ahead, built = gathered.variant(name), lazy.variant(name)
        assert [r.scenario for r in ahead] == [r.scenario for r in built]
        assert [r.scenario.seed for r in ahead] == [1, 2]
        for a, b in zip(ahead, built, strict=True):
            assert a.events.equals(b.events) and a.summary.equals(b.summary)
    assert list(gathered.variants) == ["duplicates", "no-heartbeat", "contention"]


def test_no_variant_runs_ahead_without_a_heartbeat_to_remove_or_with_variants_off():
    scenario = as_scenario("no-heartbeat-long-jobs").with_overrides({"horizon": 30.0})
    assert ahead_of_time(scenario) == ("contention", "duplicates")
    off = Evidence.gathered(scenario, (3,), False, {})
    assert [r.scenario.seed for r in off.runs] == [3]
    assert off.variant("contention") == [] and off._ahead == {}
