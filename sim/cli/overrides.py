"""Dotted scenario overrides written as text, as the command line takes them:
`--set policy.lease_ttl=20` (one value) and `--grid policy.lease_ttl=15,60` (a sweep's values).
Values are TOML (20, 1.5, true, [], {kind="constant", value=2}); a bare word is a string.

    parse_assignments(["policy.lease_ttl=20", "policy.claim=skip_locked"])
    # {"policy.lease_ttl": 20, "policy.claim": "skip_locked"}
"""

from __future__ import annotations

import re
import tomllib

from sim.errors import ConfigError
from sim.scenario.limits import nesting_problem, too_deep

KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")


def parse_assignments(items: list[str]) -> dict[str, object]:
    """`key=value` strings -> {dotted key: value}; values are TOML, a bare word is a string."""
    out: dict[str, object] = {}
    for item in items:
        key, sep, text = item.partition("=")
        key, text = key.strip(), text.strip()
        if not sep or not key:
            raise ConfigError(f"--set expects KEY=VALUE (e.g. policy.lease_ttl=20), got {item!r}")
        if not KEY.fullmatch(key):
            raise ConfigError(f"--set {item!r}: {key!r} is not a dotted key like policy.lease_ttl")
        if not text:
            raise ConfigError(f"--set {item!r}: missing value after '='")
        out[key] = _toml_value(key, text)
    return out


def parse_grid(items: list[str]) -> dict[str, list]:
    """`key=v1,v2,...` strings -> {dotted key: [values]}; values as in parse_assignments."""
    grid = {}
    for item in items:
        key, sep, values = item.partition("=")
        if not sep or not key.strip() or not values.strip():
            raise ConfigError(
                f"--grid expects KEY=V1,V2,... (e.g. policy.watcher_interval=5,30), got {item!r}"
            )
        grid[key.strip()] = [_toml_value(key, v.strip()) for v in values.split(",")]
    return grid


def _toml_value(key: str, text: str):
    try:
        value = tomllib.loads(f"v = {text}")["v"]
    except RecursionError:
        raise ConfigError(too_deep(key)) from None
    except tomllib.TOMLDecodeError as exc:
        if text[0] in "[{\"'" or any(c.isspace() for c in text):
            raise ConfigError(f"--set {key}={text}: not a TOML value ({exc})") from None
        return text  # a bare word: skip_locked, postgres, data/durations.csv
    deep = nesting_problem(value, key)
    if deep:
        raise ConfigError(deep)
    return value
