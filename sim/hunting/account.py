"""A bad timeline told in plain words, from its own records: the steps that matter (claims,
completions, requeues, crashes, pauses, expiries; not the idle polls), the faults labelled, the
events that break the invariant marked, and one sentence per step:

    w0 claims job 1 at 0.004 s; w0 pauses 28.8 s at 1.303 s; w0's lease on job 1 expires at
    30.004 s; w1 claims job 1 at 30.006 s; w0 wakes at 30.067 s; w0 completes job 1 at 30.075 s:
    a completion by a worker that lost the job.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from sim.db.base import JobState
from sim.model.events import STATUS_MOVES
from sim.results import lease_rows

WHAT = {  # each invariant in plain words, as the account ends
    "double_claim": "two workers held the job at once",
    "non_owner_completion": "a completion by a worker that lost the job",
    "terminal_overwritten": "a finished job overwritten",
    "duplicate_db_effect": "the job's effect booked twice",
    "duplicate_external_effect": "the payment charged twice",
    "lost_job": "a job lost: unfinished although the workers found nothing to claim",
    "stuck_processing": "a job left in Processing past its recovery",
    "attempts_not_incremented": "a lease whose attempt was not counted",
    "attempts_beyond_max": "a job run past max_attempts",
}
_SAID = {
    "claim": "{w} claims job {j}",
    "claim_lost": "{w} tries to claim job {j} and finds it taken",
    "complete": "{w} completes job {j}",
    "complete_rejected": "{w}'s completion of job {j} is refused (fenced)",
    "heartbeat_rejected": "{w}'s heartbeat on job {j} is refused: it learns it lost the job",
    "heartbeat_lost": "{w}'s heartbeat on job {j} is lost on the way",
    "abandon": "{w} gives job {j} up",
    "crash": "{w} crashes",
    "restart": "{w} restarts",
    "pause_start": "{w} pauses {d}",
    "pause_end": "{w} wakes",
    "partition_start": "{w} loses the database for {d}",
    "partition_end": "{w} reaches the database again",
    "psp_charge": "{w} charges job {j}'s payment",
    "payload_conflict": "{w} rejects job {j}: same event, other payload",
    "deadline": "{w}'s deadline fails job {j}",
    "release": "{w} releases job {j}",
    "execution_timeout": "{w} gives job {j} up at its execution timeout",
}

_TERMINAL_BY_KIND = {"complete": JobState.COMPLETED, "payload_conflict": JobState.DEAD}


@dataclass(frozen=True)
class Step:
    """One step of the story: a record (or a lease's expiry) at `t`; `breaks` marks the records
    that break the invariant."""

    t: float
    kind: str
    worker: str | None
    job: int | None
    text: str
    breaks: bool = False


def story(events: list, scenario, invariant: str, faults=()) -> list[Step]:
    """The steps of a run that matter, in time order, the breaking ones marked."""
    marks = breaking(events, scenario, invariant)
    steps = []
    for i, (t, kind, worker, job, attempt, detail) in enumerate(events):
        text = _say(kind, worker, job, attempt, detail)
        if text is not None:
            steps.append(Step(t, kind, worker, job, text, i in marks))
    for lease in lease_rows(events, scenario.horizon, {}):
        ended = lease["released_at"]
        if lease["until"] < min(scenario.horizon, ended if ended == ended else float("inf")):
            if lease["outcome"] != "crashed":
                text = f"{lease['worker']}'s lease on job {lease['job']} expires"
                steps.append(Step(lease["until"], "expiry", lease["worker"], lease["job"], text))
    for fault in faults:
        if fault.kind == "db_stall":
            text = f"the database stalls {fault.duration:.3g} s"
            steps.append(Step(fault.at, "db_stall", None, None, text))
    return sorted(steps, key=lambda s: s.t)


def _say(kind, worker, job, attempt, detail) -> str | None:
    if kind in ("requeue", "release") and worker == "watcher":
        return f"the watcher makes job {job} {detail}" if detail else None
    if kind in STATUS_MOVES and detail is None:
        return None
    template = _SAID.get(kind)
    if template is None:
        return None
    if kind == "psp_charge" and detail != "new":
        return None
    duration = f"{detail:.3g} s" if isinstance(detail, float) else ""
    return template.format(w=worker, j=job, d=duration)


def account(steps: list[Step], invariant: str) -> str:
    """The story in one paragraph, ending with what broke."""
    parts = [f"{s.text} at {s.t:.6g} s" for s in steps]
    return "; ".join(parts) + f": {WHAT.get(invariant, invariant)}."


def breaking(events: list, scenario, invariant: str) -> set[int]:
    """Positions of the records that break `invariant` (what a timeline marks)."""
    marks: set[int] = set()
    latest: dict[int, tuple] = {}
    final: dict[int, str] = {}
    effects: Counter = Counter()
    charges: Counter = Counter()
    event_of = {job: detail for _t, kind, _w, job, _a, detail in events if kind == "enqueue"}
    leases = lease_rows(events, scenario.horizon, {})
    revoked = {(lease["revoked_at"], lease["revoked_by"], lease["job"]) for lease in leases}
    stuck = {lease["job"] for lease in leases if lease["end_reason"] in ("crashed", "expired")}
    cap = scenario.policy.claim_cap
    for i, (t, kind, worker, job, attempt, detail) in enumerate(events):
        if invariant == "double_claim" and kind == "claim" and (t, worker, job) in revoked:
            marks.add(i)
        if kind == "claim":
            if invariant == "attempts_beyond_max" and attempt > cap:
                marks.add(i)
            if (
                invariant == "attempts_not_incremented"
                and attempt != latest.get(job, (0, 0))[1] + 1
            ):
                marks.add(i)
            latest[job] = (worker, attempt)
            final.pop(job, None)
        elif kind == "complete" and invariant == "non_owner_completion":
            if latest.get(job) != (worker, attempt):
                marks.add(i)
        if kind == "effect":
            effects[detail] += 1
            if invariant == "duplicate_db_effect" and effects[detail] > 1:
                marks.add(i)
        if kind == "psp_charge" and detail == "new":
            charges[event_of.get(job)] += 1
            if invariant == "duplicate_external_effect" and charges[event_of.get(job)] > 1:
                marks.add(i)
        new = _TERMINAL_BY_KIND.get(kind)
        if kind in STATUS_MOVES and detail is not None:
            new = detail
        if new is not None:
            if invariant == "terminal_overwritten" and final.get(job, new) != new:
                marks.add(i)
            if new in (JobState.COMPLETED, JobState.DEAD):
                final[job] = new
            elif kind != "claim":
                final.pop(job, None)
        if (
            invariant in ("lost_job", "stuck_processing")
            and job in stuck
            and kind
            in (
                "crash",
                "abandon",
                "claim",
            )
        ):
            marks.add(i)
    return marks
