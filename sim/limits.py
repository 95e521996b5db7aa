"""The largest scenario Lease Lab accepts, checked once when a scenario is validated.

Time values are bounded so that every timestamp a run binds (horizon + lease TTL + worker clock
skew) fits the timestamptz range both backends share: Python's datetime, which the postgres
backend goes through, reaches year 9999 (PostgreSQL itself goes further). Sizes are bounded by an
estimate of the simulated events a run schedules, so that a run that would take hours or exhaust
memory is refused up front instead of hanging.
"""

from __future__ import annotations

MAX_SECONDS = 1e9  # any time value (horizon, TTL, intervals, durations, skew): about 31.7 years
MAX_WORKERS = 10_000  # policy.workers: each worker is a set of processes and random streams
MAX_JOBS = 2_000_000  # workload.jobs: each job is a table row and a dozen events
MAX_CANDIDATES = 1_000  # policy.candidates: ids one claim reads
MAX_BATCH = 1_000_000  # policy.watcher_batch, policy.max_attempts: bound as PostgreSQL integers
MAX_SEED = 2**63 - 1  # a TOML integer (and a bigint)
MAX_RUNS = 100_000  # runs of one sweep (grid points x replications) or review (seeds)
MAX_EVENTS = 50_000_000  # about 5 wall minutes and a few GB on a laptop
EVENTS_PER_JOB = (
    12  # measured: claim, PSP call, completion, heartbeats ... (bench_model: ~14 with polls)
)
EVENTS_PER_FAULT = 4  # a crash, pause or partition: its start, end and the retries around it


def estimate_events(scenario) -> list[tuple[str, str, float, str]]:
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
            "faults.crash_rate",
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


def size_problem(scenario) -> str | None:
    """One line naming the setting that makes the run too big to simulate, or None."""
    terms = estimate_events(scenario)
    total = sum(term[2] for term in terms)
    if total <= MAX_EVENTS:
        return None
    key, formula, events, advice = terms[0]
    return (
        f"{key}: this run would schedule about {total:.2g} simulated events, over the limit of "
        f"{MAX_EVENTS:.0e} (largest part: {formula} = {events:.2g}); {advice}"
    )
