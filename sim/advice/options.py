"""The rules of sim.advise's arguments, written once and read by both doors: advise() checks its
keyword arguments with them (ConfigError naming the argument), and `python -m sim advise` checks
its options with the same rules before it calls advise() (ConfigError naming the flag; sim/cli/main
only parses them). NUMBERS says what each number allows, PAIRS which arguments exclude or need
another; each says it in both doors' words."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from sim.advice.candidates import DEFAULT_TTLS, PREFER
from sim.errors import ConfigError
from sim.scenario.dists import Dist
from sim.scenario.limits import MAX_RUNS, MAX_SECONDS, MAX_WORKERS


@dataclass(frozen=True)
class Number:
    """One number: advise()'s keyword (None when its option is a p99 that becomes a Dist), the
    option that gives it (None: advise() only), its bounds, and the option's words for them."""

    keyword: str | None
    flag: str | None
    zero_ok: bool = False  # 0 allowed (else > 0)
    whole: bool = False
    most: float | None = None  # the highest allowed, if any
    unit: str = "seconds"  # the option's words after its lower bound ("> 0 seconds")
    low_words: str | None = None  # the option's own words for the lower bound
    high_words: str | None = None  # ... and for the upper one

    @property
    def dest(self) -> str:
        """The option's name in an argparse namespace."""
        assert self.flag is not None
        return self.flag[2:].replace("-", "_")

    def allows(self, value) -> bool:
        """Whether `value` is within the bounds (a number assumed)."""
        low = value >= 0 if self.zero_ok else value > 0
        return bool(math.isfinite(value) and low and (self.most is None or value <= self.most))

    def check_argument(self, value) -> None:
        """ConfigError naming advise()'s keyword when `value` is not allowed."""
        name = self.keyword
        ok = (
            isinstance(value, int | float | np.number)
            and not isinstance(value, bool)
            and math.isfinite(value)
        )
        if ok and self.whole:
            ok = float(value).is_integer()
        if not ok or value < 0 or (value == 0 and not self.zero_ok):
            bound = ">= 0" if self.zero_ok else "> 0"
            kind = "a whole number" if self.whole else "a number"
            raise ConfigError(f"{name}: must be {kind} {bound}, got {value!r}")
        if self.most is not None and value > self.most:
            raise ConfigError(f"{name}: must be at most {self.most:,g}, got {value!r}")

    def check_option(self, value) -> None:
        """ConfigError naming the option ("--pause-p99 0: must be > 0 seconds")."""
        if self.allows(value):
            return
        if self.most is not None and value > self.most:
            words = self.high_words or f"must be at most {self.most:g} s"
        else:
            words = self.low_words or f"must be {'>= 0' if self.zero_ok else '> 0'} {self.unit}"
        raise ConfigError(f"{self.flag} {value:g}: {words}")


RUNS = f"must be from 1 to {MAX_RUNS:,}"
NUMBERS = (  # in the order they are checked; None (not given) is not checked
    Number("target_per_day", "--target-per-day", unit="false expiries a day"),
    Number(
        "replications", "--replications", whole=True, most=MAX_RUNS, low_words=RUNS, high_words=RUNS
    ),
    Number("pause_rate", "--pause-rate", zero_ok=True, unit="per worker-hour"),
    Number(None, "--pause-p99", most=MAX_SECONDS),
    Number("crash_rate", "--crash-rate", zero_ok=True, unit="per worker-hour"),
    Number("pause_hours", "--pause-hours", unit="worker-hours"),
    Number(
        "workers",
        "--workers",
        whole=True,
        most=MAX_WORKERS,
        low_words="must be at least 1",
        high_words=f"must be at most {MAX_WORKERS:,}",
    ),
    Number("poll_interval", "--poll-interval", most=MAX_SECONDS),
    Number("arrival_rate", "--arrival-rate", unit="jobs per second"),
    Number("min_ttl", "--min-ttl"),
    Number(None, "--heartbeat-delay-p99"),
    Number("db_stall_rate", "--db-stall-rate", zero_ok=True, unit="per day"),
    Number("db_stall_duration", "--db-stall-seconds"),  # advise() also takes a Dist
    Number("max_db_load", "--max-db-load", unit="statements per second"),
    Number("restart_delay", None, zero_ok=True),
    Number("statement_latency", None, zero_ok=True),
    Number("recovery_tolerance", None, zero_ok=True),
    Number("heartbeats_per_ttl", None),
    Number("evidence_jobs", None, whole=True),
    Number("margin", None),
)
MARGIN_WORDS = "must be >= 1 (predicted false expiry <= target / margin)"


@dataclass(frozen=True)
class Pair:
    """`keyword` either excludes `other` (both given) or needs it (given without it), said in
    advise()'s words and in the options' (`{value}`: the option's value)."""

    keyword: str
    other: str
    excludes: bool
    argument_words: str
    option_words: str

    def broken(self, given: dict) -> bool:
        mine, theirs = given.get(self.keyword) is not None, given.get(self.other) is not None
        return mine and (theirs if self.excludes else not theirs)


BOTH_TARGETS = Pair(
    "target_per_day",
    "target_false_expiry",
    True,
    "target_per_day: give a target per job (target_false_expiry) or per day, not both",
    "--target-per-day: give it or --target (per job), not both",
)
PAIRS = (  # advise()'s keywords; pause_duration stands for --pause-p99
    Pair("pause_duration", "pauses", True, "pauses: give measured pauses or pause_duration, not "
         "both", "--pauses: give it or --pause-p99, not both (it measures what that assumes)"),
    Pair("pause_hours", "pause_rate", True, "pause_hours: give it (the rate is then measured) or "
         "pause_rate, not both",
         "--pause-hours: give it or --pause-rate, not both (it measures what that assumes)"),
    Pair("pause_column", "pauses", False, "pause_column: applies to a file of measured pauses; "
         "give pauses too", "--pause-column: applies to a file of measured pauses; give --pauses "
         "FILE"),
    Pair("pause_hours", "pauses", False, "pause_hours: needs pauses (the measured pauses it "
         "counts)", "--pause-hours: applies to a file of measured pauses; give --pauses FILE"),
    BOTH_TARGETS,
    Pair("target_per_day", "arrival_rate", False, "target_per_day: needs arrival_rate (jobs/s), "
         "since how many jobs a day there are decides what a per-day target asks of each job",
         "--target-per-day {value:g}: needs --arrival-rate (jobs/s), since how many jobs a day "
         "there are decides what it asks of each job"),
)  # fmt: skip
TARGET_WORDS = "must be a probability between 0 and 1"


def check_arguments(given: dict) -> None:
    """ConfigError naming the first of advise()'s arguments (`given`, by keyword) that NUMBERS,
    the targets, `prefer` or PAIRS refuse."""
    target = given["target_false_expiry"]
    if BOTH_TARGETS.broken(given):  # the targets first
        raise ConfigError(BOTH_TARGETS.argument_words)
    if target is not None:
        Number("target_false_expiry", None).check_argument(target)
        if target >= 1:
            raise ConfigError(f"target_false_expiry: must be a probability below 1, got {target!r}")
    prefer = given["prefer"]
    if not isinstance(prefer, str) or prefer not in PREFER:
        raise ConfigError(f"prefer: {prefer!r} is not one of {', '.join(PREFER)}")
    for rule in NUMBERS:
        value = given.get(rule.keyword) if rule.keyword else None
        if value is not None and not isinstance(value, Dist):
            rule.check_argument(value)
    if given["margin"] < 1:
        raise ConfigError(f"margin: {MARGIN_WORDS}, got {given['margin']!r}")
    for pair in PAIRS:
        if pair.broken(given):
            raise ConfigError(pair.argument_words)


def command_line_arguments(options) -> dict:
    """advise()'s keyword arguments (all but the durations) from the options of `python -m sim
    advise` (an argparse namespace: target, pause_rate, pause_p99, ...), each checked first by
    the rules above: ConfigError names the first bad one by its flag ("--pause-p99 0: must be
    > 0 seconds"). A p99 option becomes a lognormal with its median at p99/10 (pauses) or p99/20
    (heartbeat statement delay); --pauses FILE (measured pause durations, read as the durations
    file is) replaces --pause-p99, and --pause-hours (the worker-hours it covers) --pause-rate."""
    o = options
    if o.target is not None and not 0 < o.target < 1:
        raise ConfigError(f"--target {o.target:g}: {TARGET_WORDS}")
    for rule in NUMBERS:
        value = getattr(o, rule.dest) if rule.flag else None
        if value is not None:
            rule.check_option(value)
    longest = max(DEFAULT_TTLS)  # the ladder advise() searches without candidates
    if o.min_ttl is not None and o.min_ttl > longest:
        raise ConfigError(
            f"--min-ttl {o.min_ttl:g}: must be at most {longest} s, the longest TTL the advisor "
            "considers"
        )
    arguments = {
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
    for pair in PAIRS:
        if pair.broken(arguments):
            raise ConfigError(pair.option_words.format(value=arguments[pair.keyword]))
    return arguments
