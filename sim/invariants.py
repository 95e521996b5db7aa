"""Jepsen-style checks of a finished run: what must never happen, and what a scenario expects to.

Each violation names the invariant, the job and what was seen. A scenario lists in `expect` the
violations it exists to demonstrate (the read-then-write race expects double claims); anything
else is unexpected.

A check reads a finished run (sim.results.Run: its log, leases, jobs, final tables) and imports
nothing from sim.results, which calls it for Run.check(); sim.check(run) is the public entry.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from sim.db.base import JobState
from sim.errors import ConfigError
from sim.model.events import STATUS_MOVES
from sim.scenario.pinned import recovery_deadline
from sim.scenario.settings import recovery_allowance


@dataclass(frozen=True)
class Violation:
    invariant: str
    job: int | None
    detail: str
    by: str | None = None  # who made the write that broke it (a worker, or "watcher")
    cause: str | None = (
        None  # whose mechanism that write was: claim, watcher, or worker (a late write)
    )


@dataclass
class Report:
    violations: list[Violation]
    expected: tuple[str, ...]

    @property
    def unexpected(self) -> list[Violation]:
        return [v for v in self.violations if v.invariant not in self.expected]

    @property
    def ok(self) -> bool:
        return not self.unexpected

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for v in self.violations:
            out[v.invariant] = out.get(v.invariant, 0) + 1
        return out

    def frame(self) -> pd.DataFrame:
        frame = pd.DataFrame(
            [v.__dict__ for v in self.violations], columns=["invariant", "job", "detail"]
        )
        frame["expected"] = frame["invariant"].isin(self.expected)
        return frame

    def __str__(self) -> str:
        if not self.violations:
            return "invariants: all hold"
        lines = ["invariants:"]
        for name, count in sorted(self.counts().items()):
            tag = "expected" if name in self.expected else "UNEXPECTED"
            lines.append(f"  {name}: {count} ({tag})")
        return "\n".join(lines)


# what the checks read of a run; sim.results.Run has them all
# (this module does not import it: Run.check calls us)
RUN_ATTRIBUTES = (
    "scenario",
    "log",
    "events",
    "leases",
    "jobs",
    "lost",
    "table_jobs",
    "table_ledger",
)


def check(run) -> Report:
    """Check every invariant of `run` against its event log and final tables."""
    if not all(hasattr(run, name) for name in RUN_ATTRIBUTES):
        raise ConfigError(
            f"run: expected the result of sim.run(...), got {type(run).__name__} {run!r:.60}"
        )
    found: list[Violation] = []
    for checker in (
        _lost_jobs,
        _double_claims,
        _non_owner_completions,
        _duplicate_db_effects,
        _duplicate_external_effects,
        _attempts,
        _attempts_beyond_max,
        _stuck_processing,
        _held_by_dead_owner,
        _terminal_overwritten,
        _statement_errors,
        _never_completed,
    ):
        found.extend(checker(run))
    return Report(found, tuple(run.scenario.expect))


def _lost_jobs(run):
    for row in run.lost.itertuples():
        yield Violation(
            "lost_job",
            int(row.job),
            f"still {row.status} at the horizon although workers found nothing to claim "
            f"(enqueued at {row.enqueued_at:.3f}s)",
        )


def _double_claims(run):
    """A claim while another worker's lease ran. When something made the held job claimable
    first (a watcher's requeue, a release, a deadline failure by another), that write is named
    as the cause: the claim only took what it was handed."""
    events = run.events
    moves = events[events["kind"].isin(STATUS_MOVES) & (events["detail"] == JobState.PENDING)]
    by_job = {job: list(zip(g["t"], g["worker"], strict=True)) for job, g in moves.groupby("job")}
    for row in run.leases[run.leases["end_reason"] == "revoked"].itertuples():
        handed = [
            (t, who)
            for t, who in by_job.get(row.job, ())
            if row.start < t <= row.revoked_at and who != row.worker
        ]
        detail = (
            f"{row.revoked_by} claimed it at {row.revoked_at:.3f}s while {row.worker}'s lease "
            f"(attempt {row.attempt}) ran to {row.until:.3f}s"
        )
        if handed:
            t, who = handed[-1]
            detail += f", after {who} made it Pending at {t:.3f}s"
        who = handed[-1][1] if handed else row.revoked_by
        cause = ("watcher" if who == "watcher" else "worker") if handed else "claim"
        yield Violation("double_claim", int(row.job), detail, who, cause)


def _non_owner_completions(run):
    """A completion committed by a worker that was no longer the job's latest lease holder."""
    latest: dict[int, tuple[str, int]] = {}
    for t, kind, worker, job, attempt, _ in run.log:
        if kind == "claim":
            latest[job] = (worker, attempt)
        elif kind == "complete" and latest.get(job) != (worker, attempt):
            owner = latest.get(job)
            yield Violation(
                "non_owner_completion",
                job,
                f"{worker} (attempt {attempt}) completed it at {t:.3f}s; "
                f"the lease was {owner[0]}'s (attempt {owner[1]})",
                worker,
                "worker",
            )


def _duplicate_db_effects(run):
    """Duplicate database effects as the log counts them (what Lease Lab committed, which a
    queue's SQL cannot alter); the ledger must agree row for row, and where it does not (rows
    lost, or added, by something else) that is a violation of its own."""
    ledger = run.table_ledger.groupby("event_id").size()
    logged = run.events[run.events.kind == "effect"].groupby("detail").size()
    every = ledger.index.union(logged.index)
    ledger, logged = ledger.reindex(every, fill_value=0), logged.reindex(every, fill_value=0)
    for event_id in every:
        effects, rows = int(logged[event_id]), int(ledger[event_id])
        if effects == rows:
            if rows > 1:
                yield Violation(
                    "duplicate_db_effect", None, f"ledger holds {rows} rows for {event_id}"
                )
            continue
        said = f"log says {effects} effects of {event_id}, the ledger holds {rows}"
        if max(effects, rows) > 1:
            yield Violation("duplicate_db_effect", None, said)
        yield Violation("ledger_mismatch", None, said)


def _statement_errors(run):
    """Every failure of a statement of the user's queue (sim.db.queue.guard): a run whose
    statements fail is not a clean run."""
    for error in getattr(run, "statement_errors", None) or []:
        detail = (
            f"{error['where']}: {error['statement']} failed {error['count']} times: SQLSTATE "
            f"{error['sqlstate']} {error['message']}"
        )
        for _ in range(int(error["count"])):
            yield Violation("statement_error", None, detail)


def _never_completed(run):
    """Jobs kept being claimed but none could finish: completions failed (a server error), and
    none went through (refusals alone are fencing at work, not this)."""
    kinds = run.events["kind"]
    claims, done = int((kinds == "claim").sum()), int((kinds == "complete").sum())
    refused = int((kinds == "complete_rejected").sum())
    failed = int(((kinds == "db_error") & (run.events["detail"] == "complete")).sum())
    jobs = int((kinds == "enqueue").sum()) or len(run.table_jobs)
    if done == 0 and failed > 0 and jobs and claims > jobs:
        yield Violation(
            "no_completion",
            None,
            f"{claims} claims of {jobs} jobs and none completed: {refused} completions refused, "
            f"{failed} failed",
        )


def _duplicate_external_effects(run):
    if run.scenario.policy.idempotency_key:
        return
    events = run.events
    charges = events[(events.kind == "psp_charge") & (events.detail == "new")]
    per_event = charges.merge(run.jobs[["job", "event_id"]], on="job").groupby("event_id").size()
    for event_id, count in per_event[per_event > 1].items():
        yield Violation(
            "duplicate_external_effect", None, f"the PSP charged {event_id} {count} times"
        )


def _attempts(run):
    """Every lease increments attempts by one, and the table keeps the count."""
    seen: dict[int, int] = {}
    for t, kind, _worker, job, attempt, _ in run.log:
        if kind == "claim":
            before = seen.get(job, 0)
            if attempt != before + 1:
                yield Violation(
                    "attempts_not_incremented",
                    job,
                    f"claim at {t:.3f}s got attempt {attempt} after {before}",
                )
            seen[job] = attempt
    table = run.table_jobs.set_index("id")["attempts"]
    gone = deleted_jobs(run)
    for job, claims in seen.items():
        if job in gone or (job in table.index and pd.isna(table[job])):
            continue  # deleted once finished, or a queue that keeps no attempts count
        if table.get(job) != claims:
            yield Violation(
                "attempts_not_incremented",
                job,
                f"{claims} leases, the table says attempts={table.get(job)}",
            )


def deleted_jobs(run) -> set[int]:
    """Jobs the final table no longer holds that the log shows finished (Completed or Dead): a
    queue that deletes a job once done (graphile-worker) keeps nothing to check them against."""
    held = set(run.table_jobs["id"].tolist())
    jobs = run.jobs
    done = jobs.loc[jobs["status"].isin([JobState.COMPLETED, JobState.DEAD]), "job"].tolist()
    return {int(job) for job in done if job not in held}


def keeps_attempts(run) -> bool:
    """Does the queue keep an attempts count? (dump_jobs returns NULL attempts when it has none.)"""
    attempts = run.table_jobs["attempts"]
    return not (len(attempts) and attempts.isna().all())


def _stuck_processing(run):
    """An expired lease left Processing longer than the recovery mechanism allows."""
    allowance = recovery_allowance(run.scenario)
    horizon = run.scenario.horizon
    moves: dict[int, list[float]] = {}  # when each job left Processing, or was leased again
    for t, kind, _worker, job, _attempt, detail in run.log:
        if kind in ("claim", "complete", "payload_conflict") or (
            kind in STATUS_MOVES
            and detail is not None  # requeued, released or failed by a deadline
        ):
            moves.setdefault(job, []).append(t)
    for lease in run.leases.itertuples():
        if lease.end_reason not in ("crashed", "expired", "open") or lease.until >= horizon:
            continue
        later = [t for t in moves.get(lease.job, []) if t > lease.start]
        resolved = min(later) if later else float("inf")
        deadline = recovery_deadline(run.scenario.faults.db_stalls, lease.until, allowance)
        if resolved > deadline and deadline < horizon:
            yield Violation(
                "stuck_processing",
                int(lease.job),
                f"lease of {lease.worker} expired at {lease.until:.3f}s; "
                f"still Processing at {min(resolved, horizon):.3f}s",
            )


def _attempts_beyond_max(run):
    """No claim may take a job that already used max_attempts leases (every claim path checks it),
    plus max_stalls recoveries from stalls when the policy counts a stall budget apart."""
    policy = run.scenario.policy
    cap = policy.claim_cap
    limit = (
        f"max_attempts is {cap}"
        if cap == policy.max_attempts
        else (f"max_attempts + max_stalls is {cap}")
    )
    for t, kind, worker, job, attempt, _ in run.log:
        if kind == "claim" and attempt > cap:
            yield Violation(
                "attempts_beyond_max",
                job,
                f"{worker} claimed it at {t:.3f}s as attempt {attempt}; {limit}",
            )


def _held_by_dead_owner(run):
    """A job whose owner died holding it, with a lease that outlives the horizon because the TTL is
    longer than the whole run: within the run it is a lock, and nothing can ever take the job.
    Reported when the owner died at least a recovery allowance before the horizon. A normal TTL that
    merely runs past the end (a crash shortly before it) is censoring, not a finding."""
    horizon = run.scenario.horizon
    if run.scenario.policy.lease_ttl < horizon:
        return
    allowance = recovery_allowance(run.scenario)
    status = run.jobs.set_index("job")["status"]
    last_attempt = run.leases.groupby("job")["attempt"].max()
    for lease in run.leases.itertuples():
        if (
            lease.outcome == "crashed"
            and lease.until >= horizon
            and recovery_deadline(run.scenario.faults.db_stalls, lease.released_at, allowance)
            < horizon
            and status.get(lease.job) == JobState.PROCESSING
            and lease.attempt == last_attempt[lease.job]
        ):
            yield Violation(
                "stuck_processing",
                int(lease.job),
                f"{lease.worker} crashed holding it at {lease.released_at:.3f}s; its lease runs to "
                f"{lease.until:.6g}s, past the horizon ({horizon:g}s): "
                "still Processing, held by a dead owner",
            )


def _terminal_overwritten(run):
    """A job Completed or Dead must stay so: a later requeue, release, deadline failure or
    completion that changes its status overwrote a final outcome (River #1302, Solid Queue #589)."""
    final: dict[int, tuple[str, float, str]] = {}
    for t, kind, worker, job, _attempt, detail in run.log:
        if kind == "complete":
            new = JobState.COMPLETED
        elif kind == "payload_conflict":
            new = JobState.DEAD
        elif kind in STATUS_MOVES and detail is not None:
            new = detail
        elif kind == "claim":
            final.pop(
                job, None
            )  # only a claim that overwrote it could get here; the races report it
            continue
        else:
            continue
        before = final.get(job)
        if before is not None and before[0] != new:
            yield Violation(
                "terminal_overwritten",
                job,
                f"{before[2]} made it {before[0]} at {before[1]:.3f}s; "
                f"{worker} made it {new} at {t:.3f}s",
                worker,
                "watcher" if worker == "watcher" else "worker",
            )
        if new in (JobState.COMPLETED, JobState.DEAD):
            final[job] = (new, t, worker)
        else:
            final.pop(job, None)
