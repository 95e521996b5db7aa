"""The field-rule table (sim.scenario.rules) and the scenario preamble (settings.prepared): one
table read by validate and by every override, and a scenario validated once at the edge."""

from __future__ import annotations

import dataclasses

import pytest

import sim.scenario.settings as settings
from sim.errors import ConfigError
from sim.scenario import limits
from sim.scenario.fields import hints_of
from sim.scenario.rules import FIELD_RULES, ITEM_RULES, SECONDS, rules_of
from sim.scenario.settings import Faults, Policy, Scenario, prepared, preset, validate


def _hint(dotted: str) -> object:
    cls: object = Scenario
    for part in dotted.split("."):
        cls = hints_of(cls)[part]  # type: ignore[arg-type]
    return cls


def test_every_row_of_the_table_names_a_field_and_its_unit_fits_its_type():
    for key, rule in FIELD_RULES:
        hint = _hint(key)
        assert rule.message or rule.unit == SECONDS, key
        if rule.unit == SECONDS:
            assert hint is float, key
    for section, rows in ITEM_RULES.items():
        item = hints_of(Faults)[section].__args__[0]  # type: ignore[attr-defined]
        assert {name for name, _ in rows} <= set(hints_of(item)), section


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("policy.lease_ttl", -1.0, "policy.lease_ttl: must be > 0 seconds"),
        ("workload.rate", 0, "workload.rate: must be > 0 jobs per second"),
        ("faults.crash_rate", -2, "faults.crash_rate: must be >= 0 per worker-hour"),
        ("policy.workers", 0, f"policy.workers: must be from 1 to {limits.MAX_WORKERS:,}"),
        ("policy.claim", "sometimes", "policy.claim: must be one of read_then_write, "),
        ("seed", -1, "seed: must be a whole number >= 0"),
        ("seed", limits.MAX_SEED + 1, f"seed: must be at most {limits.MAX_SEED} (a 64-bit"),
        ("faults.clock_offset", 2e9, "faults.clock_offset: 2e+09 s is too long: time values"),
    ],
)
def test_an_override_the_API_a_hand_built_scenario_and_TOML_get_the_same_line(key, value, message):
    """The same table answers --set / sim.run overrides (as each value is coerced), a Scenario
    built in code (validate) and a TOML file (from_dict)."""
    section, _, leaf = key.rpartition(".")
    lines = []
    with pytest.raises(ConfigError) as info:
        preset("baseline").with_overrides({key: value})
    lines.append(str(info.value))
    with pytest.raises(ConfigError) as info:
        validate(
            Scenario(
                **{
                    section: {"policy": Policy, "workload": settings.Workload, "faults": Faults}[
                        section
                    ](**{leaf: value})
                }
            )
            if section
            else Scenario(**{key: value})
        )
    lines.append(str(info.value))
    data = {section: {leaf: value}} if section else {key: value}
    with pytest.raises(ConfigError) as info:
        settings.from_dict(data)
    lines.append(str(info.value))
    assert all(line.startswith(message) for line in lines), lines
    assert len(set(lines)) == 1, lines
    if not message.endswith("too long: time values"):
        assert lines[0] == f"{key}: {next(r.message for r in rules_of(key) if not r.holds(value))}"


def test_a_review_with_overrides_and_a_seed_is_validated_once(monkeypatch):
    checked = []
    problems = settings._problems
    monkeypatch.setattr(settings, "_problems", lambda s: checked.append(s) or problems(s))
    scenario, queue = prepared("baseline", {"policy.lease_ttl": 20, "workload.jobs": 5}, seed=7)
    assert (scenario.policy.lease_ttl, scenario.workload.jobs, scenario.seed) == (20.0, 5, 7)
    assert queue is None and scenario.validated and len(checked) == 1
    assert validate(scenario) is scenario and settings.as_scenario(scenario) is scenario
    reseeded = scenario.replace(seed=8)  # a new seed: only the seed's own rules
    assert reseeded.validated and reseeded.seed == 8 and len(checked) == 1
    with pytest.raises(ConfigError, match=r"^seed: must be a whole number >= 0$"):
        scenario.replace(seed=-1)
    assert scenario.replace(horizon=30.0).validated and len(checked) == 2  # others: validated


def test_a_scenario_built_by_hand_or_copied_is_still_validated():
    bad = Scenario(policy=Policy(lease_ttl=-1.0))
    assert not bad.validated
    for check in (validate, settings.as_scenario, lambda s: prepared(s)[0]):
        with pytest.raises(ConfigError, match=r"^policy.lease_ttl: must be > 0 seconds$"):
            check(bad)
    good = preset("baseline")
    copy = dataclasses.replace(good, policy=Policy(lease_ttl=-1.0))  # not marked: checked again
    assert good.validated and not copy.validated
    with pytest.raises(ConfigError, match=r"^policy.lease_ttl: must be > 0 seconds$"):
        validate(copy)
    with pytest.raises(ConfigError, match=r"^policy.prefetch: a batch claim is one SKIP LOCKED"):
        prepared(good, {"policy.prefetch": 4})  # a rule across fields, after the overrides


def test_an_override_is_coerced_by_its_field_type_before_its_rules():
    scenario = preset("baseline").with_overrides({"policy.workers": 3, "policy.lease_ttl": 20})
    assert scenario.policy.lease_ttl == 20.0 and isinstance(scenario.policy.lease_ttl, float)
    with pytest.raises(ConfigError, match=r"^policy.workers: expected a whole number, got str"):
        preset("baseline").with_overrides({"policy.workers": "many"})
    unknown = r"^policy.lease_tll: unknown key; did you mean policy.lease_ttl\?$"
    with pytest.raises(ConfigError, match=unknown):
        preset("baseline").with_overrides({"policy.lease_tll": 1})
    with pytest.raises(ConfigError, match=r"^polcy: unknown section; did you mean policy\?$"):
        preset("baseline").with_overrides({"polcy.lease_ttl": 1})
