"""Records a kill cut off, rebuilt from the final tables: a completion that committed just before
its worker was killed, in the instant between the COMMIT and the write of its record.

The database is the witness: a ledger row (worker, attempt, applied_at) with no `effect` record,
and a Completed job whose owner and attempt match, with no `complete` record, get their records
back at the times the tables hold; the crash record of that worker then no longer names the job
(it held nothing once its completion committed). Each repair is listed in LiveRun.repaired.
The tables are PostgresBackend's dumps: their times are already scenario seconds.
"""

from __future__ import annotations

from sim.db.base import JobState


def repair(records: list[list], tables: dict) -> tuple[list[list], list[str]]:
    logged_effects = {(r[2], r[3], r[4]) for r in records if r[1] == "effect"}
    logged_completions = {(r[3], r[4]) for r in records if r[1] == "complete"}
    added, notes = [], []
    completed = {row[0]: row for row in tables["jobs"] if row[3] == JobState.COMPLETED}
    for _entry, job, event_id, _amount, worker, attempt, t in tables["ledger"]:
        if (worker, job, attempt) in logged_effects:
            continue
        added.append([t, "effect", worker, job, attempt, event_id])
        notes.append(
            f"effect of job {job} (attempt {attempt}) by {worker} at {t:.3f}s, from the ledger"
        )
        row = completed.get(job)
        if (
            row is not None
            and row[4] == worker
            and row[6] == attempt
            and (job, attempt) not in logged_completions
        ):
            done = row[9]
            added.append([done, "complete", worker, job, attempt, None])
            notes.append(
                f"completion of job {job} (attempt {attempt}) by {worker} at {done:.3f}s, from the "
                "jobs table"
            )
            _unhold(records, worker, job, done)
    records = sorted(records + added, key=lambda r: r[0])
    return records, notes


def _unhold(records: list[list], worker: str, job: int, done: float) -> None:
    """The first crash of `worker` after `done` that names `job`: it held nothing by then."""
    for record in records:
        if record[1] == "crash" and record[2] == worker and record[3] == job and record[0] >= done:
            record[3] = record[4] = record[5] = None
            return
