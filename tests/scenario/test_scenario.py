"""Scenario validation, TOML round trips and presets: bad input gets one clear line."""

import pytest

from sim import Scenario, preset, preset_names
from sim.errors import ConfigError
from sim.scenario.dists import Dist
from sim.scenario.durations import read_durations
from sim.scenario.settings import LeaseWarning, dumps, load, loads, save

PRESETS = {
    "baseline",
    "read-then-write-race",
    "crash-recovery",
    "gc-pause-zombie",
    "partition-zombie",
    "duplicate-delivery",
    "no-heartbeat-long-jobs",
}


def test_required_presets_exist_and_round_trip_through_toml():
    assert PRESETS <= set(preset_names())
    for name in preset_names():
        scenario = preset(name)
        assert scenario.name == name and scenario.description
        assert loads(dumps(scenario)) == scenario


def test_save_refuses_to_overwrite(tmp_path):
    path = save(preset("baseline"), tmp_path / "mine.toml")
    before = path.read_text()
    with pytest.raises(ConfigError, match="already exists"):
        save(Scenario(), path)
    assert path.read_text() == before
    assert load(path) == preset("baseline")


@pytest.mark.parametrize(
    "assignments, message",
    [
        ({"policy.lease_ttl": 0}, r"^policy\.lease_ttl: must be > 0 seconds$"),
        ({"policy.lease_ttl": -5.0}, r"^policy\.lease_ttl: must be > 0 seconds$"),
        ({"policy.workers": 0}, r"^policy\.workers: must be from 1 to 10,000$"),
        (
            {"policy.leese_ttl": 3},
            r"^policy\.leese_ttl: unknown key; did you mean policy\.lease_ttl\?$",
        ),
        ({"polcy.lease_ttl": 3}, r"^polcy: unknown section; did you mean policy\?$"),
        ({"policy.workers": "four"}, r"^policy\.workers: expected a whole number, got str 'four'$"),
        ({"policy.heartbeat": 1}, r"^policy\.heartbeat: expected true or false, got int 1$"),
        (
            {"policy.claim": "optimistic"},
            r"^policy\.claim: must be one of read_then_write, conditional_update, skip_locked, "
            r"select_for_update$",
        ),
        (
            {"workload.processing": {"kind": "lognormal", "median": 2.0, "p99": 1.0}},
            r"^workload\.processing\.p99: must be greater than median$",
        ),
        (
            {"workload.processing": {"kind": "gamma"}},
            r"^workload\.processing\.kind: 'gamma' is not one of",
        ),
        (
            {"faults.crashes": [{"worker": 9, "at": 1.0}]},
            r"^faults\.crashes\[0\]\.worker: must be a worker index 0\.\.3$",
        ),
        ({"expect": ["double_clam"]}, r"^expect\[0\]: 'double_clam' is not one of"),
    ],
)
def test_bad_values_name_the_field(assignments, message):
    with pytest.raises(ConfigError, match=message) as info:
        preset("baseline").with_overrides(assignments)
    assert "\n" not in str(info.value)


def test_heartbeat_interval_not_below_ttl_warns():
    with pytest.warns(
        LeaseWarning,
        match="policy.heartbeat_interval 30 s >= policy.lease_ttl 30 s: leases will lapse",
    ):
        preset("baseline").with_overrides({"policy.heartbeat_interval": 30.0})


def test_broken_toml_and_unknown_preset():
    with pytest.raises(ConfigError, match=r"^mine\.toml: not valid TOML"):
        loads("[policy\nworkers = ", "mine.toml")
    with pytest.raises(
        ConfigError,
        match=r"^scenario 'crash-recovry': no such preset; did you mean crash-recovery\?$",
    ):
        preset("crash-recovry")


def test_distributions_from_toml_and_csv(tmp_path):
    csv = tmp_path / "durations.csv"
    csv.write_text("seconds\n1.5\n2.5\n")
    scenario = loads(f'[workload]\nprocessing = {{ csv = "{csv}" }}\npsp_call = 0.25\n')
    assert scenario.workload.processing == Dist.empirical([1.5, 2.5])
    assert scenario.workload.psp_call == Dist.constant(0.25)


@pytest.mark.parametrize(
    "content, message",
    [
        ("", r"empty file"),
        ("seconds\n", r"column 'seconds' has no durations"),
        ("seconds\n1\nabc\n", r":3: seconds='abc' is not a number of seconds"),
        ("seconds\n-1\n", r":2: seconds=-1 must be a finite duration >= 0 seconds"),
    ],
)
def test_bad_duration_csv(tmp_path, content, message):
    path = tmp_path / "d.csv"
    path.write_text(content)
    with pytest.raises(ConfigError, match=message):
        read_durations(path)
    with pytest.raises(ConfigError, match=r"no column 'ms'; columns are seconds"):
        path.write_text("seconds\n1\n")
        read_durations(path, "ms")


def test_lognormal_by_median_and_p99():
    d = Dist.lognormal(2.0, 20.0)
    assert d.quantile(0.5) == pytest.approx(2.0)
    assert d.quantile(0.99) == pytest.approx(20.0)
