"""The advisor's inputs, checked: the observed durations (and measured pauses) read with
suspicion, the fault assumptions, the ladders of candidate settings, the target, and the load the
workers carry (an arrival rate they cannot is refused in one line, naming the unit when the
durations look like another one in which they would carry it).

The bundled example, sim/data/sample_durations.csv (`python -m sim advise sample`), holds 2000
payment processing times made by sample_durations() below (seed 20260515), written by
`write_sample_durations('sim/data/sample_durations.csv')` below; tests/advice/test_advisor.py
checks that the file and the function still agree.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from importlib import resources
from pathlib import Path

import numpy as np
import pandas as pd

from sim.advice.candidates import (
    DEFAULT_HEARTBEATS,
    DEFAULT_TTLS,
    DEFAULT_WATCHERS,
    pool_of,
    rate_of,
)
from sim.advice.options import Number
from sim.advice.risk import SECONDS_PER_DAY, Assumptions
from sim.errors import ConfigError
from sim.scenario.dists import Dist
from sim.scenario.durations import (
    DURATIONS,
    PAUSES,
    UNIT_WORDS,
    UNITS,
    Durations,
    from_values,
    read_durations,
)
from sim.support.in_words import percent

MAX_SAMPLES = 20_000  # longer duration lists are represented by this many quantiles
SAMPLE_SEED = 20260515


def sample_durations_path() -> Path:
    """The bundled example CSV of payment processing times (column processing_seconds)."""
    return Path(str(resources.files("sim") / "data" / "sample_durations.csv"))


def sample_durations(n: int = 2000, seed: int = SAMPLE_SEED) -> pd.DataFrame:
    """Synthetic payment processing times: 96% card payments, lognormal (median 1.2 s, p99 6 s);
    4% slow paths (3-D Secure challenge, PSP retry), lognormal (median 12 s, p99 90 s); ms
    resolution."""
    rng = np.random.default_rng(seed)
    slow = rng.random(n) < 0.04
    fast_sigma = math.log(6.0 / 1.2) / 2.326348
    slow_sigma = math.log(90.0 / 12.0) / 2.326348
    seconds = np.where(
        slow,
        rng.lognormal(math.log(12.0), slow_sigma, n),
        rng.lognormal(math.log(1.2), fast_sigma, n),
    )
    method = np.where(slow, "3ds", rng.choice(["card", "wallet", "sepa"], n, p=[0.7, 0.2, 0.1]))
    return pd.DataFrame({"processing_seconds": np.round(seconds, 3), "method": method})


def write_sample_durations(path: str | Path) -> Path:
    path = Path(path)
    sample_durations().to_csv(path, index=False, float_format="%.3f", lineterminator="\n")
    return path


# ---- inputs -------------------------------------------------------------------------------------


def read(durations, column: str | None = None, unit: str = "s", *, kind=None) -> Durations:
    """Observed durations as sim.scenario.durations.Durations (seconds + how they were read): from a
    CSV path ("sample" is the bundled example), an array-like in `unit`, or a Durations; ConfigError
    if bad. kind=sim.scenario.durations.PAUSES reads measured pauses (their messages name
    pause_column)."""
    pauses = kind is PAUSES
    noun, column_name = ("pauses", "pause_column") if pauses else ("durations", "column")
    if isinstance(durations, Durations):
        if column is not None:
            raise ConfigError(f"{column_name}: only applies when {noun} is a CSV path")
        return durations
    if isinstance(durations, str | Path):
        if not pauses and str(durations) == "sample" and not Path(durations).exists():
            durations = sample_durations_path()
        return read_durations(durations, column, unit, kind=PAUSES if pauses else DURATIONS)
    if column is not None:
        raise ConfigError(f"{column_name}: only applies when {noun} is a CSV path")
    if isinstance(durations, pd.DataFrame):
        raise ConfigError(f"{noun}: give one column (a Series or array), not a DataFrame")
    return from_values(durations, unit, kind=PAUSES if pauses else DURATIONS)


def durations_dist(values: np.ndarray) -> Dist:
    if len(values) > MAX_SAMPLES:
        values = np.quantile(values, (np.arange(MAX_SAMPLES) + 0.5) / MAX_SAMPLES)
    return Dist.empirical(np.round(values, 6))


def positive(name: str, value, *, zero_ok: bool = False, whole: bool = False) -> None:
    """ConfigError naming `name` unless `value` is a (whole) number > 0 (>= 0 with zero_ok)."""
    Number(name, None, zero_ok=zero_ok, whole=whole).check_argument(value)


def ladder(name: str, values, *, allow_none: bool = False) -> list:
    if isinstance(values, str) or not isinstance(values, Sequence | np.ndarray):
        raise ConfigError(f"candidates.{name}: expected a list of seconds, got {values!r}")
    out: list[float | None] = []
    for v in values:
        if v is None and allow_none:
            out.append(None)
            continue
        positive(f"candidates.{name}", v)
        out.append(float(v))
    if not out:
        raise ConfigError(f"candidates.{name}: has no values")
    return sorted(set(out), key=lambda v: (v is not None, v or 0.0))


def assumptions(measured: Durations | None, given: dict) -> Assumptions:
    """The fault assumptions of advise()'s arguments (`given`, checked by options.check_arguments),
    checked; measured pauses replace the pause tail (and, with the worker-hours they cover, the
    pause rate)."""
    pause_rate, pause_duration = given["pause_rate"], given["pause_duration"]
    if given["pause_hours"] is not None and measured is not None:  # options.PAIRS: one of them
        pause_rate = measured.n / float(given["pause_hours"])
    stall = given["db_stall_duration"]
    if not isinstance(stall, Dist):  # a number of seconds (options.NUMBERS checked it)
        stall = Dist.constant(stall)
    delay = given["heartbeat_delay"]
    return Assumptions(
        pause_rate=2.0 if pause_rate is None else float(pause_rate),
        pause_duration=(
            durations_dist(measured.seconds)
            if measured is not None
            else Dist.lognormal(0.5, 5.0)
            if pause_duration is None
            else pause_duration
        ),
        crash_rate=float(given["crash_rate"]),
        statement_latency=float(given["statement_latency"]),
        heartbeat_delay=Assumptions.heartbeat_delay if delay is None else delay,
        db_stall_rate=float(given["db_stall_rate"]),
        db_stall_duration=stall,
        restart_delay=float(given["restart_delay"]),
    ).check()


def ladders(candidates: dict, min_ttl) -> dict:
    """The ladders searched first: the defaults, or the user's candidates, checked."""
    unknown = set(candidates) - {"ttl", "heartbeat_interval", "watcher_interval"}
    if unknown:
        raise ConfigError(
            f"candidates: unknown key {sorted(unknown)[0]!r}; use ttl, heartbeat_interval, "
            "watcher_interval"
        )
    ttls = ladder("ttl", candidates.get("ttl", DEFAULT_TTLS))
    if min_ttl is not None and min_ttl > max(ttls):
        raise ConfigError(
            f"min_ttl: {min_ttl:g} s is above every candidate TTL (the longest considered is "
            f"{max(ttls):g} s); lower it or add longer TTLs to candidates['ttl']"
        )
    return {
        "ttl": ttls,
        "heartbeat_interval": ladder(
            "heartbeat_interval",
            candidates.get("heartbeat_interval", DEFAULT_HEARTBEATS),
            allow_none=True,
        ),
        "watcher_interval": ladder(
            "watcher_interval", candidates.get("watcher_interval", DEFAULT_WATCHERS)
        ),
    }


def inputs(read_in: Durations, measured, load: dict, a: Assumptions, given: dict) -> dict:
    """Everything the advice was computed from (Advice.inputs)."""
    values = read_in.seconds
    out = {
        "durations_n": int(len(values)),
        "durations_median": float(np.median(values)),
        "durations_p99": float(np.quantile(values, 0.99)),
        "durations_max": float(values.max()),
        "durations_read": {**read_in.facts(), "echo": read_in.echo()},
        "pauses_source": "assumed" if measured is None else "measured",
        "pause_rate": a.pause_rate,
        "pause_duration": a.pause_duration,
        "crash_rate": a.crash_rate,
        "workers": int(given["workers"]),
        "poll_interval": float(given["poll_interval"]),
        "arrival_rate": None if given["arrival_rate"] is None else float(given["arrival_rate"]),
        **load,
        "claim_takes_expired": bool(given["claim_takes_expired"]),
        "statement_latency": a.statement_latency,
        "assumptions": a,
        "margin": float(given["margin"]),
        "recovery_tolerance": float(given["recovery_tolerance"]),
        "heartbeats_per_ttl": float(given["heartbeats_per_ttl"]),
        "max_db_load": given["max_db_load"],
        "min_ttl": None if given["min_ttl"] is None else float(given["min_ttl"]),
        "prefer": given["prefer"],
        "seed": given["seed"],
    }
    if measured is not None:
        hours = given["pause_hours"]
        rate = (
            f"{measured.n} in {hours:g} worker-hours"
            if hours is not None
            else "the rate assumed (give pause_hours to measure it)"
        )
        out["pauses_read"] = {**measured.facts(), "echo": f"{measured.echo()}; {rate}"}
    return out


def load(
    job: Dist,
    workers: int,
    arrival_rate,
    assumptions: Assumptions,
    read_in: Durations | None = None,
) -> dict:
    """The pool and its load: an arrival rate it cannot carry is refused (naming workers and the
    capacity, or the unit when the durations look like another one that it would carry); without
    a rate, half the capacity is assumed."""
    pool = pool_of(job, workers, assumptions)
    if arrival_rate is not None:
        try:
            pool.refuse_overload(float(arrival_rate))
        except ConfigError:
            refuse_unit(job, workers, float(arrival_rate), assumptions, read_in)
            raise
    rate = rate_of(pool, arrival_rate)
    return {
        "pool": pool,
        "jobs_per_s": rate,
        "capacity": pool.capacity,
        "utilisation": pool.utilisation(rate),
        "load_warning": None if arrival_rate is None else pool.load_warning(rate),
    }


def refuse_unit(job: Dist, workers: int, rate: float, a: Assumptions, read_in) -> None:
    """ConfigError naming --unit when the durations look like another unit (by their column's
    name or their scale): the overload is then most likely the unit's, and the one line says what
    the workers carry in that unit (and --workers too, if even that is too little). Nothing when
    the durations look like what they were read as (the overload refusal stands)."""
    if read_in is None or read_in.suspected_unit is None:
        return
    other = read_in.suspected_unit
    pool = pool_of(job, workers, a)
    factor = UNITS[other] / UNITS[read_in.unit]
    scaled = pool_of(Dist.empirical(np.asarray(job.samples, float) * factor), workers, a)
    then = (
        f"{percent(scaled.utilisation(rate))} busy"
        if scaled.utilisation(rate) < 1
        else f"still short: add --workers {scaled.workers_for(rate)}"
    )
    raise ConfigError(
        f"unit: {read_in.warnings[0]}; read as {UNIT_WORDS[read_in.unit]}, {workers} workers "
        f"carry {pool.capacity:.3g} jobs/s against the {rate:.3g} given, while read as "
        f"{UNIT_WORDS[other]} they carry {scaled.capacity:.3g} jobs/s ({then}): give --unit "
        f"{other} (unit='{other}')"
    )


def per_job_target(per_day: float, jobs_per_s: float) -> float:
    jobs_per_day = jobs_per_s * SECONDS_PER_DAY
    if per_day >= jobs_per_day:
        raise ConfigError(
            f"target_per_day: {per_day:g} a day is not below the {jobs_per_day:,.0f} jobs a day at "
            f"{jobs_per_s:g} jobs/s; a target must be a share of them"
        )
    return per_day / jobs_per_day
