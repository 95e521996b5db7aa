"""Generated bad values at every scenario field, through the command line and the Python API.

Whatever the field and whatever is wrong with the value (its type, not finite, out of range, too
big to simulate), the answer is the same: exit 2 / ConfigError, one `error:` line that names the
field, no traceback, and the run never starts (so it cannot hang; pytest-timeout bounds each test
in case one did). Generated malformed DSNs never show their password anywhere. Fields come from
the scenario dataclasses themselves, so a field added later is covered by its type at least.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import typing

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import sim
from sim import limits
from sim.__main__ import main
from sim.db.errors import DatabaseError
from sim.db.server import redact_dsn
from sim.dists import Dist
from sim.errors import ConfigError
from sim.scenario import (
    ARRIVALS,
    CLAIM_STRATEGIES,
    CLOCKS,
    CRASH_POINTS,
    CRASH_TARGETS,
    INVARIANTS,
    PARTITION_MODES,
    SHUTDOWNS,
    WATCHER_ACTIONS,
    Faults,
    Policy,
    Scenario,
    Workload,
    validate,
)
from tests.interface.test_hardening import one_error_line

SETTINGS = settings(
    max_examples=400,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
SECTIONS = {"workload": Workload, "policy": Policy, "faults": Faults}
LIST_ITEMS = {"faults.crashes", "faults.pauses", "faults.partitions", "faults.crash_points"}


def _fields() -> dict[str, object]:
    """Every scenario field as a dotted key -> its type hint."""
    out = {}
    for f in dataclasses.fields(Scenario):
        hint = typing.get_type_hints(Scenario)[f.name]
        if hint in SECTIONS.values():
            for g in dataclasses.fields(hint):
                out[f"{f.name}.{g.name}"] = typing.get_type_hints(hint)[g.name]
        else:
            out[f.name] = hint
    return out


FIELDS = _fields()

# ---- bad values -------------------------------------------------------------------------------------

words = st.text("abcdefghijklmnopqrstuvwxyz_", min_size=1, max_size=10)
non_finite = st.sampled_from([math.inf, -math.inf, math.nan])
negative = st.floats(max_value=-1e-6, allow_infinity=False, allow_nan=False)
too_long = st.floats(min_value=limits.MAX_SECONDS * 1.001, allow_infinity=False, allow_nan=False)
# intervals so short (rates so high) that baseline's 600 s x 4 workers exceed limits.MAX_EVENTS
too_often = st.floats(min_value=1e-300, max_value=1e-6)
too_frequent = st.floats(min_value=1e8, allow_infinity=False, allow_nan=False)
not_a_probability = st.one_of(
    negative, st.floats(min_value=1.001, allow_infinity=False, allow_nan=False)
)
fraction = st.floats(min_value=0.01, max_value=0.99).map(lambda x: x + 1.5)


def enum(choices):
    return words.filter(lambda w: w not in choices)


def wrong_type(hint) -> st.SearchStrategy:
    """Values of another type than `hint` (bool is not a number here, a float not a whole number)."""
    scalars = {
        float: st.one_of(words, st.booleans(), st.lists(st.integers(0, 9), max_size=2), non_finite),
        int: st.one_of(words, st.booleans(), fraction, st.integers(0, 9).map(float), non_finite),
        bool: st.one_of(words, st.integers(0, 1), st.floats(0, 1)),
        str: st.one_of(
            st.integers(),
            st.floats(allow_nan=False),
            st.booleans(),
            st.lists(st.integers(), max_size=2),
        ),
    }
    if typing.get_origin(hint) is typing.Union or type(hint).__name__ == "UnionType":
        hint = next(a for a in typing.get_args(hint) if a is not type(None))
    return scalars[hint]


def bad_dist() -> st.SearchStrategy:
    number = st.one_of(negative, non_finite, too_long)
    return st.one_of(
        words,
        st.booleans(),
        st.lists(st.integers(0, 9), min_size=1, max_size=2),
        number,
        st.fixed_dictionaries(
            {
                "kind": enum(
                    ("constant", "exponential", "uniform", "lognormal", "pareto", "empirical")
                )
            }
        ),
        st.fixed_dictionaries({"kind": st.just("exponential"), "mean": st.one_of(number, words)}),
        st.fixed_dictionaries(
            {
                "kind": st.just("lognormal"),
                "median": st.just(1.0),
                "p99": st.one_of(number, st.just(0.5)),
            }
        ),
        st.fixed_dictionaries({"kind": st.just("uniform"), "low": st.just(0.0), "high": number}),
        st.fixed_dictionaries({"csv": words.map(lambda w: f"no/such/{w}.csv")}),
        st.fixed_dictionaries({"csv": st.integers()}),
        st.fixed_dictionaries({"bogus": st.integers()}),
    )


def bad_items(key: str) -> st.SearchStrategy:
    """A list for faults.crashes / pauses / partitions / crash_points with one bad entry."""
    time = st.one_of(negative, non_finite, too_long, words)
    entry = {
        "faults.crashes": st.one_of(
            st.fixed_dictionaries({"worker": st.just(0), "at": time}),
            st.fixed_dictionaries({"worker": st.integers(4, 10**6), "at": st.just(1.0)}),
            st.fixed_dictionaries({"at": st.just(1.0)}),
            st.fixed_dictionaries({"worker": st.just(0), "job": st.just(1), "at": st.just(1.0)}),
            st.fixed_dictionaries({"job": st.one_of(words, fraction), "at": st.just(1.0)}),
        ),
        "faults.pauses": st.one_of(
            st.fixed_dictionaries({"worker": st.just(0), "at": time, "duration": st.just(1.0)}),
            st.fixed_dictionaries(
                {"worker": st.just(0), "at": st.just(1.0), "duration": st.one_of(time, st.just(0))}
            ),
            st.fixed_dictionaries(
                {
                    "worker": st.one_of(st.integers(4, 10**6), st.integers(max_value=-1), words),
                    "at": st.just(1.0),
                    "duration": st.just(1.0),
                }
            ),
            st.fixed_dictionaries({"worker": st.just(0), "at": st.just(1.0)}),
        ),
        "faults.crash_points": st.one_of(
            st.fixed_dictionaries({"point": enum(CRASH_POINTS)}),
            st.fixed_dictionaries(
                {"point": st.just("after_psp"), "probability": st.one_of(not_a_probability, words)}
            ),
            st.fixed_dictionaries(
                {
                    "point": st.just("after_psp"),
                    "limit": st.one_of(st.integers(max_value=0), fraction),
                }
            ),
            st.fixed_dictionaries({"probability": st.just(0.5)}),
        ),
    }
    entry["faults.partitions"] = entry["faults.pauses"]
    return st.one_of(
        st.one_of(words, st.integers(), st.booleans()),  # not a list
        st.lists(
            st.one_of(st.integers(), words), min_size=1, max_size=2
        ),  # entries that are not tables
        st.lists(st.fixed_dictionaries({"bogus": st.integers()}), min_size=1, max_size=1),
        entry[key].map(lambda e: [e]),
    )


RANGE = {  # values of the right type that are out of range, for the fields whose range is known
    "horizon": st.one_of(negative, st.just(0.0), too_long),
    "seed": st.integers(max_value=-1),
    "backend": enum(("memory", "postgres")),
    "expect": st.one_of(enum(INVARIANTS).map(lambda w: [w]), words),
    "workload.jobs": st.one_of(st.integers(max_value=-1), st.integers(limits.MAX_JOBS + 1, 2**62)),
    "workload.arrival": enum(ARRIVALS),
    "workload.rate": st.one_of(negative, st.just(0.0)),
    "workload.psp_at": not_a_probability,
    "workload.duplicate_delivery": not_a_probability,
    "workload.payload_mismatch": not_a_probability,
    "policy.workers": st.one_of(
        st.integers(max_value=0), st.integers(limits.MAX_WORKERS + 1, 2**62)
    ),
    "policy.poll_interval": st.one_of(negative, st.just(0.0), too_long, too_often),
    "policy.claim": enum(CLAIM_STRATEGIES),
    "policy.candidates": st.one_of(
        st.integers(max_value=0), st.integers(limits.MAX_CANDIDATES + 1, 2**62)
    ),
    "policy.select_to_update_gap": st.one_of(negative, too_long),
    "policy.lease_ttl": st.one_of(negative, st.just(0.0), too_long),
    "policy.heartbeat_interval": st.one_of(negative, st.just(0.0), too_long, too_often),
    "policy.watcher_interval": st.one_of(negative, st.just(0.0), too_long, too_often),
    "policy.watcher_action": enum(WATCHER_ACTIONS),
    "policy.watcher_batch": st.one_of(
        st.integers(max_value=0), st.integers(limits.MAX_BATCH + 1, 2**62)
    ),
    "policy.max_attempts": st.one_of(
        st.integers(max_value=0), st.integers(limits.MAX_BATCH + 1, 2**62)
    ),
    "policy.watcher_gap": st.one_of(negative, too_long),
    "policy.retry_backoff": st.one_of(negative, too_long),
    "policy.deadline": st.one_of(negative, too_long),
    "policy.clock": enum(CLOCKS),
    "faults.crash_rate": st.one_of(negative, too_frequent),
    "faults.pause_rate": st.one_of(negative, too_frequent),
    "faults.partition_rate": st.one_of(negative, too_frequent),
    "faults.heartbeat_loss": not_a_probability,
    "faults.partition_mode": enum(PARTITION_MODES),
    "faults.clock_skew": st.one_of(negative, too_long),
    "faults.crash_target": enum(CRASH_TARGETS),
    "faults.shutdown": enum(SHUTDOWNS),
}


def bad_value(key: str) -> st.SearchStrategy:
    hint = FIELDS[key]
    if key in LIST_ITEMS:
        return bad_items(key)
    if hint is Dist:
        return bad_dist()
    if typing.get_origin(hint) is tuple:
        return st.one_of(
            RANGE.get(key, st.nothing()), st.lists(st.integers(), min_size=1, max_size=2)
        )
    return st.one_of(wrong_type(hint), RANGE.get(key, st.nothing()))


cases = st.sampled_from(sorted(FIELDS)).flatmap(lambda key: st.tuples(st.just(key), bad_value(key)))


def toml(value) -> str:
    """A value as TOML text for --set (inline tables and arrays, nan and inf as TOML spells them)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return (
            "nan"
            if math.isnan(value)
            else ("inf" if value > 0 else "-inf")
            if math.isinf(value)
            else repr(value)
        )
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(toml(v) for v in value) + "]"
    return "{" + ", ".join(f"{k} = {toml(v)}" for k, v in value.items()) + "}"


# ---- the properties ------------------------------------------------------------------------------------


def test_every_field_has_bad_values():
    for key in FIELDS:
        if key not in ("name", "description"):  # free text: only a wrong type is wrong
            assert key in RANGE or key in LIST_ITEMS or FIELDS[key] in (bool, Dist), key


@pytest.mark.timeout(120)
@SETTINGS
@given(cases)
def test_command_line_refuses_every_bad_value_in_one_line(capsys, case):
    key, value = case
    assert main(["run", "baseline", "--set", f"{key}={toml(value)}"]) == 2
    assert key in one_error_line(capsys)


@pytest.mark.timeout(120)
@SETTINGS
@given(cases)
def test_api_refuses_every_bad_value_naming_the_field(case):
    key, value = case
    with pytest.raises(ConfigError) as info:
        sim.run("baseline", **{key: value})
    assert key in str(info.value) and "\n" not in str(info.value)


@pytest.mark.timeout(120)
@SETTINGS
@given(cases)
def test_constructors_or_their_validation_refuse_every_bad_value(case):
    key, value = case
    section, _, leaf = key.rpartition(".")
    with pytest.raises(ConfigError) as info:
        if section:
            validate(Scenario(**{section: SECTIONS[section](**{leaf: value})}))
        else:
            validate(Scenario(**{key: value}))
    assert key in str(info.value) and "\n" not in str(info.value)


# ---- DSNs: never their password ------------------------------------------------------------------------

passwords = st.text(
    "ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz23456789", min_size=10, max_size=16
)
junk = st.text("abcdefghijklmnopqrstuvwxyz", min_size=1, max_size=8)
DSN_FORMS = [  # each a server that cannot be used: malformed, or nobody listening on 127.0.0.1:1
    lambda pw, j: f"postgresql://bob:{pw}@[::1/db",
    lambda pw, j: f"postgresql://bob:{pw}@127.0.0.1:{j}/db",
    lambda pw, j: f"postgresql://bob:{pw}%zz@127.0.0.1:1/db",
    lambda pw, j: f"postgresql://bob:{pw}@127.0.0.1:1/db?{j}",
    lambda pw, j: f"postgresql://bob@127.0.0.1:1/db?password={pw}&{j}",
    lambda pw, j: f"postgres://bob:{pw}@127.0.0.1:1/{j}?connect_timeout=2",
    lambda pw, j: f"host=127.0.0.1 password={pw} {j}",
    lambda pw, j: f"host=127.0.0.1 password='{pw}",
    lambda pw, j: f"host=127.0.0.1 port=1 password={pw} {j}=1",
    lambda pw, j: f"host=127.0.0.1 port=1 user={j} password='{pw}' connect_timeout=2",
]
dsns = st.tuples(passwords, st.sampled_from(DSN_FORMS), junk).map(
    lambda t: (t[0], t[1](t[0], t[2]))
)


@pytest.mark.timeout(120)
@settings(SETTINGS, max_examples=60)
@given(dsns, st.booleans())
def test_a_password_never_shows_through_the_command_line(capsys, tmp_path, case, from_environment):
    password, dsn = case
    out = tmp_path / f"out-{password}"
    argv = [
        "run",
        "baseline",
        "--set",
        "workload.jobs=3",
        "--set",
        "horizon=10",
        "--backend",
        "postgres",
        "--out",
        str(out),
        *([] if from_environment else ["--dsn", dsn]),
    ]
    saved = os.environ.get("LEASELAB_DSN")
    os.environ["LEASELAB_DSN"] = dsn if from_environment else "postgresql://unused@127.0.0.1:1/x"
    try:
        code = main(argv)
    finally:
        os.environ.pop("LEASELAB_DSN")
        if saved is not None:
            os.environ["LEASELAB_DSN"] = saved
    captured = capsys.readouterr()
    assert (
        code == 2
        and captured.err.startswith("error: PostgreSQL at ")
        and captured.err.count("\n") == 1
    )
    assert password not in captured.out + captured.err
    assert not out.exists()  # nothing written, so no file can hold it either
    assert password not in redact_dsn(dsn)


@pytest.mark.timeout(120)
@settings(SETTINGS, max_examples=60)
@given(dsns)
def test_a_password_never_shows_through_the_api(case):
    password, dsn = case
    with pytest.raises(DatabaseError) as info:
        sim.run("baseline", backend="postgres", dsn=dsn, **{"workload.jobs": 3, "horizon": 10})
    assert password not in str(info.value) and password not in repr(info.value)
