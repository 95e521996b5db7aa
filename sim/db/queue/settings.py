"""A queue directory's own settings: `queue.toml`, a `[policy]` table of the settings that belong
to the queue rather than to the scenario run on it (claim strategy, whether claims take expired
leases, heartbeat, fencing, watcher, the stuck age as lease_ttl, retry backoff...).

    [policy]
    claim = "skip_locked"
    claim_takes_expired = false
    heartbeat = false
    lease_ttl = 3600.0        # the stuck age: the watcher's statements get it as %(stuck_after)s
    watcher_interval = 30.0

They apply over any scenario run on the queue, and `--set` (or a call's overrides) over them.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

from sim.errors import ConfigError
from sim.scenario.dists import decode_utf8
from sim.scenario.limits import MAX_SQL_BYTES, nesting_problem, too_deep
from sim.scenario.settings import Scenario
from sim.support.input_files import read_capped


def read_settings(path: Path, error: type[ConfigError]) -> dict[str, object]:
    """{"policy.NAME": value} from a queue.toml, each value checked as a scenario would check it;
    `error` (one line naming the file and the setting) if anything is wrong."""
    try:  # a regular file of at most 1 MiB, like the queue's SQL files
        raw = read_capped(path, "queue.toml", MAX_SQL_BYTES)
        data = tomllib.loads(decode_utf8(raw, path, "TOML"))
    except tomllib.TOMLDecodeError as exc:
        raise error(f"{path}: not valid TOML ({exc})") from None
    except RecursionError:
        raise error(too_deep(str(path))) from None
    except ConfigError as exc:
        raise error(str(exc)) from None
    deep = nesting_problem(data, str(path))
    if deep:
        raise error(deep)
    extra = [key for key in data if key != "policy"]
    if extra:
        raise error(
            f"{path}: {extra[0]}: a queue.toml holds the queue's own [policy] settings only "
            "(the workload and the faults belong to the scenario)"
        )
    policy = data.get("policy", {})
    if not isinstance(policy, dict):
        raise error(f"{path}: policy: expected a [policy] table, got {type(policy).__name__}")
    settings = {f"policy.{key}": value for key, value in policy.items()}
    apply(Scenario(), settings, path, error)  # types, ranges and unknown keys, named
    return settings


def apply(
    scenario: Scenario, settings: dict[str, object], path: Path, error: type[ConfigError]
) -> Scenario:
    """`scenario` with the queue's settings in place of its own."""
    if not settings:
        return scenario
    try:
        return scenario.with_overrides(settings)
    except ConfigError as exc:
        raise error(f"{path}: {exc}") from None


def describe(settings: dict[str, object]) -> str:
    """'claim = skip_locked, heartbeat = false' (the settings as a queue.toml writes them)."""
    return ", ".join(
        f"{key.removeprefix('policy.')} = {str(v).lower() if isinstance(v, bool) else v}"
        for key, v in settings.items()
    )
