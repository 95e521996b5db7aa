"""The largest scenario Lease Lab accepts, checked once when a scenario is validated.

Time values are bounded so that every timestamp a run binds (horizon + lease TTL + worker clock
skew) fits the timestamptz range both backends share: Python's datetime, which the postgres
backend goes through, reaches year 9999 (PostgreSQL itself goes further). Sizes are bounded by an
estimate of the simulated events a run schedules, so that a run that would take hours or exhaust
memory is refused up front instead of hanging. The files a user gives, the nesting of TOML values,
live mode's settings and every statement of a user's own SQL have limits of their own, each named
in the message that refuses them.
"""

from __future__ import annotations

import os
from typing import Any

MAX_SECONDS = 1e9  # any time value (horizon, TTL, intervals, durations, skew): about 31.7 years
MAX_WORKERS = 10_000  # policy.workers: each worker is a set of processes and random streams
MAX_JOBS = 2_000_000  # workload.jobs: each job is a table row and a dozen events
MAX_CANDIDATES = 1_000  # policy.candidates: ids one claim reads
MAX_BATCH = 1_000_000  # policy.watcher_batch, policy.max_attempts: bound as PostgreSQL integers
MAX_DRIFT_PPM = 100_000  # faults.clock_drift_ppm: 10 %, far beyond any real oscillator (~100 ppm)
MAX_SEED = 2**63 - 1  # a TOML integer (and a bigint)
MAX_RUNS = 100_000  # runs of one sweep (grid points x replications) or review (seeds)
MAX_EVENTS = 50_000_000  # about 5 wall minutes and a few GB on a laptop
EVENTS_PER_JOB = (
    12  # measured: claim, PSP call, completion, heartbeats ... (bench_model: ~14 with polls)
)
EVENTS_PER_FAULT = 4  # a crash, pause or partition: its start, end and the retries around it

# Files a user gives: regular files only, read up to these sizes (a FIFO or /dev/zero never ends).
MAX_TOML_BYTES = 1 << 20  # a scenario file: presets are about 2 KB
MAX_SQL_BYTES = 1 << 20  # each of a queue's queries.sql and schema.sql
MAX_CSV_BYTES = 256 << 20  # a durations CSV: about 20 million short rows
MAX_TOML_DEPTH = 32  # tables and arrays inside each other (a scenario nests 3 deep)

# Live mode: real processes and wall time.
MIN_TIME_SCALE = 1e-4  # wall seconds per scenario second: 10,000 times faster than real time
MAX_TIME_SCALE = 1e4  # ... or 10,000 times slower
MAX_LIVE_SECONDS = 7 * 86_400  # --duration: a week of wall time
MAX_COMPARE_SEEDS = 1_000  # live --compare-seeds: simulated runs beside one live run
CONNECTIONS_PER_WORKER = (
    4  # a live worker and its spare, each with a statement and a heartbeat connection
)

# Every statement of a user's own SQL (the check, runs, live mode) must finish within this.
STATEMENT_TIMEOUT_S = 30.0
STATEMENT_TIMEOUT_ENV = "LEASELAB_STATEMENT_TIMEOUT"
# ... and all of them together, in one check or one run.
SQL_TOTAL_TIMEOUT_S = 3600.0
SQL_TOTAL_TIMEOUT_ENV = "LEASELAB_SQL_TOTAL_TIMEOUT"


def estimate_events(scenario: Any) -> list[tuple[str, str, float, str]]:
    """(key, how the term is computed, events, what would shrink it) for each term of a run's
    event count, largest first: an upper bound of the wakeups the simulation will schedule."""
    w, p, f, horizon = scenario.workload, scenario.policy, scenario.faults, scenario.horizon
    span = f"horizon {horizon:g} s x {p.workers} policy.workers"
    faults_per_hour = f.crash_rate + f.pause_rate + f.partition_rate
    terms = [
        (
            "workload.jobs",
            f"workload.jobs {w.jobs} x {EVENTS_PER_JOB} events per job",
            w.jobs * (1 + w.duplicate_delivery) * EVENTS_PER_JOB,
            "lower workload.jobs",
        ),
        (
            "policy.poll_interval",
            f"{span} / policy.poll_interval {p.poll_interval:g} s",
            horizon * p.workers / p.poll_interval,
            "shorten horizon, use fewer workers or raise policy.poll_interval",
        ),
        (
            max(
                ("faults.crash_rate", "faults.pause_rate", "faults.partition_rate"),
                key=lambda key: getattr(f, key.partition(".")[2]),
            ),
            f"{span} x (faults.crash_rate + faults.pause_rate + faults.partition_rate) "
            f"{faults_per_hour:g} per worker-hour",
            horizon * p.workers * faults_per_hour / 3600 * EVENTS_PER_FAULT,
            "shorten horizon or lower the fault rates",
        ),
    ]
    if p.heartbeat:
        terms.append(
            (
                "policy.heartbeat_interval",
                f"{span} / policy.heartbeat_interval {p.heartbeat_interval:g} s",
                horizon * p.workers / p.heartbeat_interval,
                "shorten horizon, use fewer workers or raise policy.heartbeat_interval",
            )
        )
    if p.process_heartbeat_interval:
        terms.append(
            (
                "policy.process_heartbeat_interval",
                f"{span} / policy.process_heartbeat_interval {p.process_heartbeat_interval:g} s",
                horizon * p.workers / p.process_heartbeat_interval,
                "shorten horizon, use fewer workers or raise policy.process_heartbeat_interval",
            )
        )
    if p.watcher:
        terms.append(
            (
                "policy.watcher_interval",
                f"horizon {horizon:g} s / policy.watcher_interval {p.watcher_interval:g} s",
                horizon / p.watcher_interval,
                "shorten horizon or raise policy.watcher_interval",
            )
        )
    return sorted(terms, key=lambda term: -term[2])


def size_problem(scenario: Any) -> str | None:
    """One line naming the setting that makes the run too big to simulate, or None (`scenario`: a
    Scenario; sim.scenario.settings imports this module)."""
    terms = estimate_events(scenario)
    total = sum(term[2] for term in terms)
    if total <= MAX_EVENTS:
        return None
    key, formula, events, advice = terms[0]
    return (
        f"{key}: this run would schedule about {total:.2g} simulated events, over the limit of "
        f"{MAX_EVENTS:.0e} (largest part: {formula} = {events:.2g}); {advice}"
    )


def statement_timeout() -> float:
    """Seconds a statement of a user's own SQL may run: $LEASELAB_STATEMENT_TIMEOUT, else 30."""
    return _seconds_from(STATEMENT_TIMEOUT_ENV, STATEMENT_TIMEOUT_S, 0.1, 86_400)


def sql_total_timeout() -> float:
    """Seconds all the statements of a user's own SQL may take together, in one check or one run:
    $LEASELAB_SQL_TOTAL_TIMEOUT, else an hour."""
    return _seconds_from(SQL_TOTAL_TIMEOUT_ENV, SQL_TOTAL_TIMEOUT_S, 1, MAX_LIVE_SECONDS)


def _seconds_from(env: str, default: float, low: float, high: float) -> float:
    """Seconds from the environment variable `env` (default when unset), from `low` to `high`;
    ConfigError naming the variable otherwise."""
    text = os.environ.get(env, "").strip()
    if not text:
        return default
    from sim.errors import ConfigError

    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not low <= value <= high:
        raise ConfigError(f"{env}={text!r}: must be a number of seconds from {low:g} to {high:g}")
    return value


def sql_total_timeout_words(used: float | None = None) -> str:
    """The total time limit of a queue's SQL as messages name it, with its setting."""
    spent = f" (its statements took {used:.3g} s together)" if used is not None else ""
    return (
        f"the queue's SQL ran past its total time limit of {sql_total_timeout():g} s{spent}; it "
        f"was stopped (set {SQL_TOTAL_TIMEOUT_ENV})"
    )


def statement_timeout_words() -> str:
    """The statement time limit as messages name it, with the setting that changes it."""
    return f"the statement time limit of {statement_timeout():g} s (set {STATEMENT_TIMEOUT_ENV})"


def nesting_problem(value: object, where: str) -> str | None:
    """One line when `value` (parsed TOML) nests tables and arrays deeper than MAX_TOML_DEPTH."""
    stack = [(value, 0)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict | list):
            if depth >= MAX_TOML_DEPTH:
                return too_deep(where)
            children = node.values() if isinstance(node, dict) else node
            stack.extend((child, depth + 1) for child in children)
    return None


def too_deep(where: str) -> str:
    """The message for TOML nested past MAX_TOML_DEPTH (also when the parser itself gives up)."""
    return (
        f"{where}: tables and arrays nested more than {MAX_TOML_DEPTH} deep; "
        "a scenario nests at most 3 (section, table, list of tables)"
    )
