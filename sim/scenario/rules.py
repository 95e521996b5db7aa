"""The scenario's field rules as one table: for each dotted key, the values it allows, their unit
and the one line that says so. The type of each field is its annotation (sim.scenario.fields
coerces by it); validate reads this table, and so does every override (--set, sim.run(**{key:
value}), a sweep's grid point) as it is coerced; the TOML codec reaches it through validate.
Rules across fields are small named functions in sim.scenario.settings."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sim.scenario import limits

CLAIM_STRATEGIES = ("read_then_write", "conditional_update", "skip_locked", "select_for_update")
ARRIVALS = ("batch", "poisson")
WATCHER_ACTIONS = ("requeue", "dead")
STALL_CHECKS = ("single", "two_phase")
PRUNE_ACTIONS = ("requeue", "dead")
IDENTITIES = ("reused", "fresh")
CLOCKS = ("db", "worker")
PARTITION_MODES = ("fail", "hang")
SHUTDOWNS = ("crash", "graceful")
RESCUES = ("watcher", "job")
COMPLETIONS = ("transaction", "background")
DEADLINE_ACTIONS = ("drop", "complete", "cancel")
CRASH_POINTS = ("after_psp", "after_marker")
CRASH_TARGETS = ("any", "holder")
BACKENDS = ("memory", "postgres")
INVARIANTS = (
    "lost_job",
    "double_claim",
    "non_owner_completion",
    "duplicate_db_effect",
    "duplicate_external_effect",
    "attempts_not_incremented",
    "stuck_processing",
    "attempts_beyond_max",
    "terminal_overwritten",
)
SECONDS = "seconds"


@dataclass(frozen=True)
class Rule:
    """What one field allows (`holds`), and the one line that says so when a value does not. A
    field in seconds is a time value: also at most limits.MAX_SECONDS, so that it fits a
    timestamptz (checked after every range, as `too_long`)."""

    holds: Callable[[Any], bool]
    message: str
    unit: str = ""

    def problem(self, key: str, value: Any) -> str | None:
        """`key: message` when `value` breaks the rule, else None."""
        return None if self.holds(value) else f"{key}: {self.message}"


def above(low: float, unit: str = SECONDS, note: str = "") -> Rule:
    return Rule(lambda v: v > low, f"must be > {low:g} {unit}{note}", unit)


def at_least(low: float, unit: str = SECONDS, note: str = "") -> Rule:
    return Rule(lambda v: v >= low, f"must be >= {low:g} {unit}{note}", unit)


def count(low: int, high: int, note: str = "", *, optional: bool = False) -> Rule:
    """A whole number from `low` to `high` (or None when `optional`)."""
    return Rule(
        lambda v: (optional and v is None) or low <= v <= high,
        f"must be from {low} to {high:,}{note}",
    )


def one_of(choices: tuple[str, ...]) -> Rule:
    return Rule(lambda v: v in choices, f"must be one of {', '.join(choices)}")


def fraction(what: str = "probability") -> Rule:
    return Rule(lambda v: 0 <= v <= 1, f"must be a {what} between 0 and 1")


TIME = Rule(lambda v: True, "", SECONDS)  # any time value (its size is what is limited)
PER_HOUR = "per worker-hour"

FIELD_RULES: tuple[tuple[str, Rule], ...] = (  # in the order validate reports them
    ("horizon", above(0)),
    ("seed", Rule(lambda v: v >= 0, "must be a whole number >= 0")),
    (
        "seed",
        Rule(
            lambda v: v <= limits.MAX_SEED,
            f"must be at most {limits.MAX_SEED} (a 64-bit integer)",
        ),
    ),
    ("backend", Rule(lambda v: v in BACKENDS, "must be memory or postgres")),
    ("workload.jobs", count(0, limits.MAX_JOBS)),
    ("workload.arrival", one_of(ARRIVALS)),
    ("workload.rate", above(0, "jobs per second")),
    ("workload.psp_at", fraction("fraction")),
    ("workload.duplicate_delivery", fraction()),
    ("workload.payload_mismatch", fraction()),
    ("policy.workers", count(1, limits.MAX_WORKERS)),
    ("policy.poll_interval", above(0)),
    ("policy.claim", one_of(CLAIM_STRATEGIES)),
    ("policy.candidates", count(1, limits.MAX_CANDIDATES)),
    ("policy.select_to_update_gap", at_least(0)),
    ("policy.prefetch", count(1, limits.MAX_CANDIDATES)),
    ("policy.lease_ttl", above(0)),
    ("policy.heartbeat_interval", above(0)),
    ("policy.watcher_interval", above(0)),
    ("policy.watcher_action", one_of(WATCHER_ACTIONS)),
    ("policy.watcher_batch", count(1, limits.MAX_BATCH)),
    ("policy.max_attempts", count(1, limits.MAX_BATCH)),
    ("policy.watcher_gap", at_least(0)),
    ("policy.rescue", one_of(RESCUES)),
    ("policy.stall_check", one_of(STALL_CHECKS)),
    (
        "policy.max_stalls",
        count(0, limits.MAX_BATCH, " (or absent: stalls count as attempts)", optional=True),
    ),
    ("policy.process_heartbeat_interval", at_least(0, note=" (0: no process liveness)")),
    ("policy.process_stale_after", above(0)),
    ("policy.prune_action", one_of(PRUNE_ACTIONS)),
    ("policy.worker_identity", one_of(IDENTITIES)),
    ("policy.deadline", at_least(0, note=" (0: no worker-side deadline)")),
    ("policy.deadline_action", one_of(DEADLINE_ACTIONS)),
    ("policy.execution_timeout", at_least(0, note=" (0: no execution timeout)")),
    ("policy.completion", one_of(COMPLETIONS)),
    ("policy.clock", one_of(CLOCKS)),
    ("faults.crash_rate", at_least(0, PER_HOUR)),
    ("faults.crash_target", one_of(CRASH_TARGETS)),
    ("faults.pause_rate", at_least(0, PER_HOUR)),
    ("faults.partition_rate", at_least(0, PER_HOUR)),
    ("faults.heartbeat_loss", fraction()),
    ("faults.partition_mode", one_of(PARTITION_MODES)),
    ("faults.clock_skew", at_least(0)),
    ("faults.clock_offset", TIME),
    (
        "faults.clock_drift_ppm",
        Rule(
            lambda v: abs(v) < limits.MAX_DRIFT_PPM,
            f"must be between -{limits.MAX_DRIFT_PPM:g} and {limits.MAX_DRIFT_PPM:g} "
            "parts per million",
        ),
    ),
    ("faults.shutdown", one_of(SHUTDOWNS)),
    ("faults.release_loss", fraction()),
)

# the fields of each entry of a faults list (a worker index is checked against policy.workers)
ITEM_RULES: dict[str, tuple[tuple[str, Rule], ...]] = {
    "crashes": (
        ("job", Rule(lambda v: v is None or 0 <= v <= limits.MAX_SEED, "must be a job id >= 0")),
        ("at", at_least(0)),
    ),
    "pauses": (("at", at_least(0)), ("duration", above(0))),
    "partitions": (("at", at_least(0)), ("duration", above(0))),
    "clock_steps": (("at", at_least(0)), ("by", TIME)),
    "db_clock_steps": (("at", at_least(0)), ("by", TIME)),
    "crash_points": (
        ("point", one_of(CRASH_POINTS)),
        ("probability", fraction()),
        ("limit", Rule(lambda v: 1 <= v <= limits.MAX_SEED, "must be at least 1")),
    ),
}


def rules_of(key: str) -> tuple[Rule, ...]:
    """The table's rules for one dotted key (none for a field any value of its type suits)."""
    return _BY_KEY.get(key, ())


_BY_KEY: dict[str, tuple[Rule, ...]] = {}
for _key, _rule in FIELD_RULES:
    _BY_KEY[_key] = (*_BY_KEY.get(_key, ()), _rule)


def too_long(key: str, seconds: float) -> str:
    """The one line for a time value over limits.MAX_SECONDS, which a timestamptz cannot hold."""
    return (
        f"{key}: {seconds:g} s is too long: time values are at most "
        f"{limits.MAX_SECONDS:g} s (about 31 years), so that every timestamp fits a timestamptz"
    )
