"""The options of `python -m sim advise` as sim.advise's keyword arguments: each checked first,
so that a bad one is one ConfigError line naming its flag (sim/cli/main only parses them)."""

from __future__ import annotations

import math

from sim.advice.candidates import DEFAULT_TTLS
from sim.errors import ConfigError
from sim.scenario.dists import Dist
from sim.scenario.limits import MAX_RUNS, MAX_SECONDS, MAX_WORKERS


def command_line_arguments(options) -> dict:
    """advise()'s keyword arguments (all but the durations) from the options of `python -m sim
    advise` (an argparse namespace: target, pause_rate, pause_p99, ...), each checked first:
    ConfigError names the first bad one by its flag ("--pause-p99 0: must be > 0 seconds").
    A p99 option becomes a lognormal with its median at p99/10 (pauses) or p99/20 (heartbeat
    statement delay); --pauses FILE (measured pause durations, read as the durations file is)
    replaces --pause-p99, and --pause-hours (the worker-hours it covers) --pause-rate."""
    o = options
    checks = _checks(o)
    for flag, value, ok, message in checks:
        if not ok or (isinstance(value, float) and not math.isfinite(value)):
            raise ConfigError(f"{flag} {value:g}: {message}")
    pairs = (
        ("--pauses", o.pauses is not None, "--pause-p99", o.pause_p99 is not None),
        ("--pause-hours", o.pause_hours is not None, "--pause-rate", o.pause_rate is not None),
    )
    for flag, given, other, also in pairs:
        if given and also:
            raise ConfigError(
                f"{flag}: give it or {other}, not both (it measures what that assumes)"
            )
    needs = [("--pause-column", o.pause_column), ("--pause-hours", o.pause_hours)]
    for flag, value in needs:
        if value is not None and o.pauses is None:
            raise ConfigError(f"{flag}: applies to a file of measured pauses; give --pauses FILE")
    if o.target_per_day is not None and o.target is not None:
        raise ConfigError("--target-per-day: give it or --target (per job), not both")
    if o.target_per_day is not None and o.arrival_rate is None:
        raise ConfigError(
            f"--target-per-day {o.target_per_day:g}: needs --arrival-rate (jobs/s), since how many "
            "jobs a day there are decides what it asks of each job"
        )
    return {
        "column": o.column,
        "unit": o.unit,
        "target_false_expiry": o.target,
        "target_per_day": o.target_per_day,
        "prefer": o.prefer,
        "replications": o.replications,
        "pause_rate": o.pause_rate,
        "pause_duration": None
        if o.pause_p99 is None
        else Dist.lognormal(o.pause_p99 / 10, o.pause_p99),
        "pauses": o.pauses,
        "pause_column": o.pause_column,
        "pause_unit": o.pause_unit,
        "pause_hours": o.pause_hours,
        "crash_rate": o.crash_rate,
        "heartbeat_delay": Dist.lognormal(o.heartbeat_delay_p99 / 20, o.heartbeat_delay_p99),
        "db_stall_rate": o.db_stall_rate,
        "db_stall_duration": o.db_stall_seconds,
        "workers": o.workers,
        "poll_interval": o.poll_interval,
        "arrival_rate": o.arrival_rate,
        "max_db_load": o.max_db_load,
        "min_ttl": o.min_ttl,
        "verify": not o.no_verify,
        "seed": o.seed,
    }


def _checks(o) -> list[tuple[str, object, bool, str]]:
    """(flag, value, whether it is allowed, what is allowed) for each option checked alone."""
    return [
        (
            "--target",
            o.target,
            o.target is None or 0 < o.target < 1,
            "must be a probability between 0 and 1",
        ),
        (
            "--target-per-day",
            o.target_per_day,
            o.target_per_day is None or o.target_per_day > 0,
            "must be > 0 false expiries a day",
        ),
        (
            "--replications",
            o.replications,
            1 <= o.replications <= MAX_RUNS,
            f"must be from 1 to {MAX_RUNS:,}",
        ),
        (
            "--pause-rate",
            o.pause_rate,
            o.pause_rate is None or o.pause_rate >= 0,
            "must be >= 0 per worker-hour",
        ),
        ("--pause-p99", o.pause_p99, o.pause_p99 is None or o.pause_p99 > 0, "must be > 0 seconds"),
        ("--crash-rate", o.crash_rate, o.crash_rate >= 0, "must be >= 0 per worker-hour"),
        (
            "--pause-p99",
            o.pause_p99,
            o.pause_p99 is None or o.pause_p99 <= MAX_SECONDS,
            f"must be at most {MAX_SECONDS:g} s",
        ),
        (
            "--pause-hours",
            o.pause_hours,
            o.pause_hours is None or o.pause_hours > 0,
            "must be > 0 worker-hours",
        ),
        ("--workers", o.workers, o.workers >= 1, "must be at least 1"),
        ("--workers", o.workers, o.workers <= MAX_WORKERS, f"must be at most {MAX_WORKERS:,}"),
        (
            "--poll-interval",
            o.poll_interval,
            o.poll_interval <= MAX_SECONDS,
            f"must be at most {MAX_SECONDS:g} s",
        ),
        ("--poll-interval", o.poll_interval, o.poll_interval > 0, "must be > 0 seconds"),
        (
            "--arrival-rate",
            o.arrival_rate,
            o.arrival_rate is None or o.arrival_rate > 0,
            "must be > 0 jobs per second",
        ),
        ("--min-ttl", o.min_ttl, o.min_ttl is None or o.min_ttl > 0, "must be > 0 seconds"),
        (
            "--heartbeat-delay-p99",
            o.heartbeat_delay_p99,
            o.heartbeat_delay_p99 > 0,
            "must be > 0 seconds",
        ),
        ("--db-stall-rate", o.db_stall_rate, o.db_stall_rate >= 0, "must be >= 0 per day"),
        (
            "--db-stall-seconds",
            o.db_stall_seconds,
            o.db_stall_seconds > 0,
            "must be > 0 seconds",
        ),
        (
            "--max-db-load",
            o.max_db_load,
            o.max_db_load is None or o.max_db_load > 0,
            "must be > 0 statements per second",
        ),
        (
            "--min-ttl",
            o.min_ttl,
            o.min_ttl is None or not o.min_ttl > max(DEFAULT_TTLS),
            f"must be at most {max(DEFAULT_TTLS)} s, the longest TTL the advisor considers",
        ),
    ]
