"""Which invariants a run broke, read from its raw event log and final tables, without building
the run's DataFrames: the hunt's screen, some 50 times cheaper than sim.check on a small run.

It decides what sim.check decides (the same rules, on the same records and the same lease rows,
sim.results.lease_rows); tests/hunting/test_runner.py holds the two to agreement on runs of every
preset under generated schedules. A run it flags is replayed and judged by sim.check itself before
anything is reported, so a finding never rests on this module alone; a certificate does (it counts
the schedules this module found clean), which is why the agreement is tested.
"""

from __future__ import annotations

import math
from collections import Counter
from types import SimpleNamespace

from sim.db.base import JobState
from sim.db.inspect import JOB_COLUMNS, LEDGER_COLUMNS
from sim.invariants import _attempts_beyond_max, _non_owner_completions, _terminal_overwritten
from sim.model.events import STATUS_MOVES
from sim.results import lease_rows
from sim.scenario.pinned import recovery_deadline
from sim.scenario.settings import recovery_allowance

_ID, _ATTEMPTS = JOB_COLUMNS.index("id"), JOB_COLUMNS.index("attempts")
_LEDGER_EVENT = LEDGER_COLUMNS.index("event_id")
_FINAL = {
    "claim": JobState.PROCESSING,
    "complete": JobState.COMPLETED,
    "payload_conflict": JobState.DEAD,
}
TERMINAL = (JobState.COMPLETED, JobState.DEAD)


def broken(events: list, scenario, tables: dict, clocks: dict, last_idle: float | None) -> Counter:
    """Violations per invariant name in a finished run: `events` its log as Event tuples but the
    idle polls (no rule reads them but the lost job's, which needs only `last_idle`, the time of
    the last), `tables` its final tables (rows), `clocks` each worker's WorkerClock (policy.clock
    = worker)."""
    horizon = scenario.horizon
    leases = lease_rows(events, horizon, {}, clocks)
    jobs = _jobs(events)
    found: Counter = Counter()
    found["lost_job"] = _lost(events, scenario, jobs, leases, last_idle)
    found["double_claim"] = sum(1 for lease in leases if lease["end_reason"] == "revoked")
    run = SimpleNamespace(log=events, scenario=scenario)
    for name, checker in (
        ("non_owner_completion", _non_owner_completions),
        ("attempts_beyond_max", _attempts_beyond_max),
        ("terminal_overwritten", _terminal_overwritten),
    ):
        found[name] = sum(1 for _ in checker(run))
    found["duplicate_db_effect"] = _db_effects(events, tables["ledger"])
    if not scenario.policy.idempotency_key:
        found["duplicate_external_effect"] = _external_effects(events, jobs)
    found["attempts_not_incremented"] = _attempts(events, tables["jobs"], jobs)
    found["stuck_processing"] = _stuck(events, scenario, leases) + _held(scenario, leases, jobs)
    return +found  # drop the zeros


def _jobs(events) -> dict[int, dict]:
    """Per enqueued job: event id, enqueue time, claims and final status (as Run.jobs)."""
    jobs: dict[int, dict] = {}
    for t, kind, _worker, job, _attempt, detail in events:
        if kind == "enqueue":
            jobs[job] = {"event_id": detail, "enqueued_at": t, "claims": 0, "status": None}
    for _t, kind, _worker, job, _attempt, detail in events:
        if job not in jobs:
            continue
        if kind == "claim":
            jobs[job]["claims"] += 1
        if detail is None:
            continue  # a move that found no row
        if kind in STATUS_MOVES:
            jobs[job]["status"] = detail
        elif kind in _FINAL:
            jobs[job]["status"] = _FINAL[kind]
    for job in jobs.values():
        if job["status"] is None:
            job["status"] = JobState.PROCESSING if job["claims"] else JobState.PENDING
    return jobs


def _lost(events, scenario, jobs, leases, last_idle: float | None) -> int:
    """sim.results.lost_jobs: unfinished although an idle poll came after the job was due."""
    if last_idle is None:
        return 0
    last_until: dict[int, float] = {}
    for lease in leases:
        if lease["until"] is not None and not _nan(lease["until"]):
            last_until[lease["job"]] = lease["until"]
    allowance = recovery_allowance(scenario)
    backoff = scenario.policy.retry_backoff
    stalls = scenario.faults.db_stalls
    retried: dict[int, float] = {}
    if backoff:
        for t, kind, _worker, job, attempt, detail in events:
            if kind in ("requeue", "deadline") and detail == JobState.PENDING:
                retried[job] = t + backoff * float(attempt) ** 4 + 1.0
    lost = 0
    for job, facts in jobs.items():
        until = last_until.get(job)
        since, allowed = (facts["enqueued_at"], 1.0) if until is None else (until, allowance)
        due = recovery_deadline(stalls, since, allowed)
        due = max(due, retried.get(job, -math.inf))
        if facts["status"] not in TERMINAL and due < last_idle:
            lost += 1
    return lost


def _db_effects(events, ledger_rows) -> int:
    """Ledger rows per event beyond one, and events whose logged effects differ from the ledger."""
    ledger = Counter(row[_LEDGER_EVENT] for row in ledger_rows)
    logged = Counter(detail for _t, kind, _w, _j, _a, detail in events if kind == "effect")
    return sum(1 for n in ledger.values() if n > 1) + sum(
        1 for event_id, n in ledger.items() if logged.get(event_id, 0) != n
    )


def _external_effects(events, jobs) -> int:
    """Events the PSP charged more than once (replays of an idempotency key are not charges)."""
    charged = Counter(
        jobs[job]["event_id"]
        for _t, kind, _w, job, _a, detail in events
        if kind == "psp_charge" and detail == "new" and job in jobs
    )
    return sum(1 for n in charged.values() if n > 1)


def _attempts(events, job_rows, jobs) -> int:
    """Every claim increments attempts by one, and the table keeps the count."""
    found = 0
    seen: dict[int, int] = {}
    for _t, kind, _worker, job, attempt, _detail in events:
        if kind == "claim":
            if attempt != seen.get(job, 0) + 1:
                found += 1
            seen[job] = attempt
    table = {row[_ID]: row[_ATTEMPTS] for row in job_rows}
    for job, claims in seen.items():
        gone = job not in table and job in jobs and jobs[job]["status"] in TERMINAL
        if gone or (job in table and (table[job] is None or _nan(table[job]))):
            continue
        if table.get(job) != claims:
            found += 1
    return found


def _stuck(events, scenario, leases) -> int:
    """sim.invariants._stuck_processing: an expired lease left longer than the recovery allows."""
    allowance = recovery_allowance(scenario)
    horizon = scenario.horizon
    moves: dict[int, list[float]] = {}
    for t, kind, _worker, job, _attempt, detail in events:
        if kind in ("claim", "complete", "payload_conflict") or (
            kind in STATUS_MOVES and detail is not None
        ):
            moves.setdefault(job, []).append(t)
    found = 0
    for lease in leases:
        if lease["end_reason"] not in ("crashed", "expired", "open") or lease["until"] >= horizon:
            continue
        later = [t for t in moves.get(lease["job"], []) if t > lease["start"]]
        resolved = min(later) if later else math.inf
        deadline = recovery_deadline(scenario.faults.db_stalls, lease["until"], allowance)
        if resolved > deadline and deadline < horizon:
            found += 1
    return found


def _held(scenario, leases, jobs) -> int:
    """sim.invariants._held_by_dead_owner: a lock-like lease of a dead owner outlives the run."""
    horizon = scenario.horizon
    if scenario.policy.lease_ttl < horizon:
        return 0
    allowance = recovery_allowance(scenario)
    last_attempt: dict[int, int] = {}
    for lease in leases:
        last_attempt[lease["job"]] = max(last_attempt.get(lease["job"], 0), lease["attempt"])
    return sum(
        1
        for lease in leases
        if lease["outcome"] == "crashed"
        and lease["until"] >= horizon
        and recovery_deadline(scenario.faults.db_stalls, lease["released_at"], allowance) < horizon
        and jobs.get(lease["job"], {}).get("status") == JobState.PROCESSING
        and lease["attempt"] == last_attempt[lease["job"]]
    )


def _nan(value) -> bool:
    return isinstance(value, float) and math.isnan(value)
