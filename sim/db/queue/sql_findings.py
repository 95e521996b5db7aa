"""What a queue's statements DO, asked of the server before the runs, for the review items the
SQL speaks to: the claim, fencing (every write by a worker) and the watcher.

Each finding comes from probes (sim.db.queue.probes): the queue's own statements driven by hand in a
scratch schema, the job put in the state a race would leave it in (held by another worker,
re-claimed by the same worker, finished, expired), then the statement under test run: did it
return a row, did it write rows (as the server counts them), what does dump_jobs read after it,
what does the server's plan write and lock. No word of the SQL text is read. The review puts
each finding beside the runs, which confirm or refute it (sim.review).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

from sim.db.base import JobState, Rows
from sim.db.queue.probes import Lab, ProbeError, lab_on
from sim.protocol.statements import claim_path, watcher_path, worker_writes
from sim.support.in_words import count, duration

if TYPE_CHECKING:
    from sim.db.queue.directory import QueueDefinition
    from sim.scenario.settings import Scenario

T0 = 1.0  # the first claim of a probe
REFUSED, WRITTEN, RETURNED = "refused", "written", "returned"  # what a stale write did
STUCK_AGE_LIMIT = 1e7  # seconds: a watcher that moves nothing this long after the claim never does


@dataclass(frozen=True)
class Finding:
    """One checklist item as the server shows it: safe or not (None: the probes could not tell),
    and why, naming each statement and where its text comes from."""

    item: str  # review check key: claim, fencing, watcher
    safe: bool | None
    text: str
    numbers: dict[str, Any] = field(default_factory=dict)


def findings(queue: QueueDefinition, scenario: Scenario, dsn: str) -> dict[str, Finding]:
    """The findings for the claim, fencing and watcher items under `scenario`'s settings."""
    with lab_on(queue, scenario.policy, dsn) as lab:
        return {
            "claim": _claim(lab),
            "fencing": _fencing(lab, scenario),
            "watcher": _watcher(lab),
        }


def _where(lab: Lab, name: str) -> str:
    return f"{name} ({lab.queue.where(name)})"


def _stopped(item: str, exc: ProbeError) -> Finding:
    return Finding(item, None, f"the probes stopped: {exc}")


# ---- the claim -----------------------------------------------------------------------------------


def _claim(lab: Lab) -> Finding:
    p = lab.policy
    names = claim_path(p)
    write = names[-1]
    if not all(lab.has(n) for n in names):
        return Finding("claim", False, f"{' and '.join(names)}: missing from the queue")
    try:
        with lab.trial():
            lab.enqueue(1)
            first = lab.claim("w0", T0)
            if first is None:
                return Finding(
                    "claim",
                    None,
                    f"{_where(lab, write)} took nothing from a queue holding one Pending job: "
                    "the probes could not go on",
                )
            plan = lab.plan(write, id=1, owner="w1", now=T0 + 1)
            second = lab.claim("w1", T0 + 1)
            alone = None
            if len(names) == 2 and p.claim != "select_for_update":
                rows = lab.execute(write, id=1, owner="w1", now=T0 + 1)
                alone = bool(rows) or lab.written > 0
            locked = lab.plan(names[0], now=T0).locks if p.claim == "select_for_update" else None
    except ProbeError as exc:
        return _stopped("claim", exc)
    numbers = {"writes": len(plan.writes), "locks": plan.locks}
    if second is not None and second[0] == 1:
        return Finding(
            "claim",
            False,
            f"{_where(lab, write)} is {plan.describe()}: a second worker's claim took the job "
            "while the first worker's lease still ran",
            numbers,
        )
    if alone:
        return Finding(
            "claim",
            False,
            f"{_where(lab, names[0])}, then {_where(lab, write)}, whose write took a job another "
            "worker held when run alone: it does not re-check the job as it writes, so two "
            "workers that read the same Pending row both win (read-then-write)",
            numbers,
        )
    if locked is False:
        return Finding(
            "claim",
            False,
            f"{_where(lab, names[0])} does not lock the row it reads (the server's plan has no "
            f"row lock), and {_where(lab, write)} then writes it whatever it became: "
            "the read, then the write, is a race",
            numbers,
        )
    how = {
        "select_for_update": f"{_where(lab, names[0])} locks the row it reads, then "
        f"{_where(lab, write)} writes it in the same transaction",
        "skip_locked": f"{_where(lab, write)} is {plan.describe()}",
    }.get(
        p.claim,
        f"{_where(lab, names[0])}, then {_where(lab, write)}, {plan.describe()}, whose write "
        "alone refused a job another worker held",
    )
    return Finding(
        "claim", True, f"{how}; a second claim while the first lease ran got nothing", numbers
    )


# ---- fencing: every write by a worker ------------------------------------------------------------


def _fencing(lab: Lab, scenario: Scenario) -> Finding:
    sent = worker_writes(scenario)  # and a write of the queue's own that other settings send
    writes = [
        n
        for n in worker_writes(scenario, any_setting=True)
        if lab.has(n) and (n in sent or n in lab.queue.overrides)
    ]
    parts: list[str] = []
    numbers: dict[str, dict[str, str | None]] = {}
    safe: bool | None = True
    for name in writes:
        try:
            cases = _fence_cases(lab, name)
        except ProbeError as exc:
            parts.append(f"{_where(lab, name)}: the probes stopped: {exc}")
            safe = None if safe else safe
            continue
        numbers[name] = cases
        parts.append(fence_text(lab, name, cases))
        through = [c for c in _HARMFUL if _harmful(name, c, cases)]
        if through:
            safe = False
        elif cases.get("own") == REFUSED or all(v is None for k, v in cases.items() if k != "own"):
            safe = None if safe else safe
    if not writes:
        return Finding("fencing", None, "no statement by which a worker writes its job was found")
    return Finding("fencing", safe, "; ".join(parts), numbers)


_HARMFUL = ("expired", "other", "same", "done")


def _harmful(name: str, case: str, cases: dict[str, str | None]) -> bool:
    """Did the stale write in `case` do harm? Any write that went through once another worker
    held or finished the job; after the watcher took the job back, a write that renewed the lease
    (a heartbeat) or went through on a job the watcher failed for good (finished and failed):
    completing a job merely requeued, before anyone took it again, loses nothing."""
    if cases.get(case) in (REFUSED, None):
        return False
    if case == "expired":
        return name == "heartbeat" or cases.get("expired_to") != JobState.PENDING
    return True


def _outcome(lab: Lab, rows: Rows) -> str:
    return WRITTEN if lab.written else RETURNED if rows else REFUSED


def _write(lab: Lab, name: str, owner: str, attempt: int, now: float) -> Rows:
    return lab.execute(name, id=1, owner=owner, attempt=attempt, now=now)


def _claimed(lab: Lab, name: str) -> tuple[int, int]:
    """(job, attempt) of w0's claim at T0 of the probe's job; ProbeError if it took nothing."""
    claimed = lab.claim("w0", T0)
    if claimed is None:
        raise ProbeError(name, "the claim took nothing, so no write could be probed")
    return claimed


def _held(state: tuple[Any, ...] | None) -> tuple[Any, Any] | None:
    """(status, lease_owner) of a dump_jobs row; None for a job the table no longer holds."""
    return None if state is None else (state[3], state[4])


def _fence_cases(lab: Lab, name: str) -> dict[str, str | None]:
    """What worker w0's write `name` did: its own lease (own), after its lease expired and the
    watcher moved the job (expired: requeued, or failed for good), after another worker took the
    job (other), after w0 itself took it again (same), after another worker finished it (done).
    None: the queue never put the job in that state (nothing moves or hands on an expired job)."""
    cases: dict[str, str | None] = {}
    with lab.trial():
        lab.enqueue(1)
        cases["own"] = _outcome(lab, _write(lab, name, "w0", _claimed(lab, name)[1], T0 + 1))
    with lab.trial():
        lab.enqueue(1)
        attempt = _claimed(lab, name)[1]
        late = T0 + lab.ttl + 1
        cases["expired"] = None
        if lab.policy.watcher and _watcher_statements(lab):
            lab.watch(late)
            state = lab.state(1)
            if state is None or state[3] != JobState.PROCESSING:
                cases["expired"] = _outcome(lab, _write(lab, name, "w0", attempt, late + 0.5))
                cases["expired_to"] = state[3] if state is not None else None
    for case, taker in (("other", "w1"), ("same", "w0"), ("done", "w1")):
        with lab.trial():
            lab.enqueue(1)
            attempt = _claimed(lab, name)[1]
            again, at = _reclaim(lab, taker, T0 + lab.ttl + 1)
            if again is None:
                cases[case] = None
                continue
            if case == "done" and not lab.complete(1, taker, again[1], at + 1):
                cases[case] = None
                continue
            cases[case] = _outcome(lab, _write(lab, name, "w0", attempt, at + 2))
    return cases


def _reclaim(lab: Lab, owner: str, now: float) -> tuple[tuple[int, int] | None, float]:
    """`owner` claims job 1 after its lease expired: by the claim itself, else after a watcher
    tick, once the job is due again as the watcher's own write decides (a retry delay its SQL
    computes, whatever policy.retry_backoff says); (None, now) if neither hands it on. Also
    when that claim happened."""
    got = lab.claim(owner, now)
    if got is None and lab.policy.watcher and _watcher_statements(lab):
        lab.watch(now)
        delay = lab.ready_after(1, now)
        if delay is not None:
            now += delay
            got = lab.claim(owner, now)
    return (got if got is not None and got[0] == 1 else None), now


_CHECKS = {
    (REFUSED, REFUSED): "checks owner and attempt",
    (REFUSED, "through"): "checks the owner but not the attempt",
    ("through", REFUSED): "checks the attempt but not the owner",
    ("through", "through"): "checks neither owner nor attempt",
}


def _refused_or_through(outcome: str | None) -> str:
    return REFUSED if outcome == REFUSED else "through"


def fence_text(lab: Lab, name: str, cases: dict[str, str | None]) -> str:
    """'complete_fenced (q/queries.sql:27) checks owner and attempt, refuses a late write once the
    watcher took the job back, and leaves a finished job alone', from what the probes saw."""
    other, same, done, expired = (cases.get(k) for k in ("other", "same", "done", "expired"))
    parts = []
    handed_on = other is not None and same is not None  # a later lease met the old one's write
    if handed_on:
        parts.append(_CHECKS[(_refused_or_through(other), _refused_or_through(same))])
    if expired == REFUSED:
        parts.append("refuses a late write once the watcher took the job back")
    elif expired is not None and _harmful(name, "expired", cases):
        took = (
            "failed the job for good"
            if cases.get("expired_to") != JobState.PENDING
            else "took the job back"
        )
        parts.append(f"lets a late write through once the watcher {took}")
    elif expired is not None:
        parts.append(
            "lets a late write through on a job the watcher requeued, before anyone took it again"
        )
    if done == REFUSED:
        parts.append("leaves a finished job alone")
    elif done == WRITTEN:
        parts.append("a late write overwrites a finished job")
    elif done == RETURNED:
        parts.append(
            "returns a finished job's row to a late write (nothing written: the worker takes it "
            "as done and commits)"
        )
    text = f"{_where(lab, name)} " + (
        ", ".join(parts[:-1]) + ", and " + parts[-1]
        if len(parts) > 1
        else parts[0]
        if parts
        else ""
    )
    if not handed_on:
        text += (
            ("; " if parts else ": ")
            + "nothing in this queue hands an expired job to another worker, so no write of an "
            "old lease could meet a new one"
        )
    if cases.get("own") == REFUSED:
        text += "; it refused even its holder's own write"
    return text


# ---- the watcher ---------------------------------------------------------------------------------


def _watcher_statements(lab: Lab) -> tuple[str, ...] | None:
    """The statements of the policy's watcher, None if the queue lacks one."""
    names = watcher_path(lab.policy)
    return names if all(lab.has(n) for n in names) else None


def _watcher(lab: Lab) -> Finding:
    p = lab.policy
    names = _watcher_statements(lab)
    try:
        if not p.watcher or names is None:
            return _no_watcher(lab, names)
        return _watches(lab, names)
    except ProbeError as exc:
        return _stopped("watcher", exc)


def _no_watcher(lab: Lab, names: tuple[str, ...] | None) -> Finding:
    if names is None:
        head = f"this queue has no watcher ({' and '.join(watcher_path(lab.policy))} left out)"
    else:
        verb = "exists" if len(names) == 1 else "exist"
        head = (
            f"{' and '.join(_where(lab, n) for n in names)} {verb} but policy.watcher = false does "
            f"not run {'it' if len(names) == 1 else 'them'}"
        )
    with lab.trial():
        lab.enqueue(1)
        lab.claim("w0", T0)
        late = T0 + lab.ttl + 1
        got, _ = _reclaim(lab, "w1", late)  # no watcher runs here: the claim itself, or nothing
    if got is not None:
        return Finding(
            "watcher",
            True,
            f"{head}; the claim itself took a job {duration(late - T0)} after its claim, its "
            "lease expired",
        )
    return Finding(
        "watcher",
        False,
        f"{head}, and the claim did not take a job whose lease had expired: nothing recovers "
        "a crashed worker's job",
    )


def _moved(lab: Lab, age: float) -> bool:
    """Does one watcher tick, `age` after a claim, move the job out of Processing?"""
    with lab.trial():
        lab.enqueue(1)
        if lab.claim("w0", T0) is None:
            raise ProbeError("claim", "the claim took nothing, so the watcher could not be probed")
        lab.watch(T0 + age)
        state = lab.state(1)
        return state is None or state[3] != JobState.PROCESSING


def stuck_age(lab: Lab) -> float | None:
    """How long after its claim the watcher first moves a job nobody renewed (to 0.1%), None if
    not within STUCK_AGE_LIMIT."""
    ttl = lab.ttl
    above = ttl * 1.001 + 1e-3
    if _moved(lab, above):
        low, high = 0.0, above
        if not _moved(lab, ttl * 0.999):
            return ttl  # at the lease's end, to the search's precision
    else:
        low, high = above, above * 2
        while not _moved(lab, high):
            if high >= STUCK_AGE_LIMIT:
                return None
            low, high = high, min(high * 4, STUCK_AGE_LIMIT)
    for _ in range(40):
        if high - low <= max(1e-3 * high, 1e-3):
            break
        middle = (low + high) / 2
        low, high = (low, middle) if _moved(lab, middle) else (middle, high)
    return high


def retry_delay(
    lab: Lab, attempt: int, move: str = "watcher", age: float | None = None
) -> float | None:
    """How long after the move that makes it Pending again the policy's claim takes a job whose
    `attempt`-th lease ended: the watcher's tick `age` (the stuck age; the TTL if None) after the
    claim, or (move = "deadline") its owner's failure at a worker-side deadline a second after
    the claim. As the queue's own statements write it, whatever policy.retry_backoff says; None
    if the job cannot be brought there (the move leaves it Dead, or it is never due again)."""
    age = lab.ttl if age is None else age
    with lab.trial():
        lab.enqueue(1)
        t = T0
        for k in range(1, attempt + 1):
            got = lab.claim("w0", t)
            if got is None or got[0] != 1:
                return None
            moved_at = t + (age * 1.001 + 1e-3 if move == "watcher" else 1.0)
            if move == "watcher":
                lab.watch(moved_at)
            else:
                lab.execute("fail_job_fenced", id=1, owner="w0", attempt=got[1], now=moved_at)
            state = lab.state(1)
            if state is None or state[3] != JobState.PENDING:
                return None
            delay = lab.ready_after(1, moved_at, precise=k == attempt)
            if delay is None or k == attempt:
                return delay
            t = moved_at + delay
    return None


def retry_delays(
    queue: QueueDefinition, scenario: Scenario, dsn: str, wanted: Iterable[tuple[str, int]]
) -> dict[tuple[str, int], float | None]:
    """{(move, attempt): retry_delay(...)} for each ("requeue" or "deadline", attempt) in
    `wanted`: when a job a run left Pending is due again, as the queue's SQL writes it."""
    with lab_on(queue, scenario.policy, dsn) as lab:
        age = stuck_age(lab) if any(move == "requeue" for move, _ in wanted) else None
        return {
            (move, attempt): retry_delay(
                lab, attempt, "watcher" if move == "requeue" else "deadline", age
            )
            for move, attempt in sorted(wanted)
        }


def _retry_delay_text(lab: Lab, age: float, numbers: dict[str, Any]) -> str:
    """A warning when the delay the watcher's own write gives a requeued job (measured at a first
    and a second attempt) is not the policy's retry_backoff x attempts^4: the runs would judge
    when a job is due by the policy; else ''."""
    if lab.policy.watcher_action != "requeue":
        return ""
    backoff = lab.policy.retry_backoff
    delays = {k: retry_delay(lab, k, age=age) for k in (1, 2)}
    numbers["retry_delays"] = delays
    if any(d is None for d in delays.values()):
        return ""
    measured = cast(dict[int, float], delays)  # none is None (above)
    expected = {k: backoff * k**4 for k in measured}
    if all(abs(measured[k] - expected[k]) <= max(0.01 * expected[k], 0.1) for k in delays):
        return ""
    numbers["retry_delay_disagrees"] = True
    first, second = measured[1], measured[2]
    law = (
        f"set retry_backoff = {first:.3g} in queue.toml"
        if first > 0 and abs(second / first - 16) <= 0.16
        else "its delay does not grow as attempts^4: the runs judge when a job is due by what "
        "its statements write"
    )
    return (
        f"; it makes a requeued job due again {duration(first)} after its tick at a first attempt "
        f"and {duration(second)} at a second, while policy.retry_backoff ({backoff:g} s x "
        f"attempts^4) says {duration(expected[1])} and {duration(expected[2])} ({law})"
    )


def _watches(lab: Lab, names: tuple[str, ...]) -> Finding:
    ttl = lab.ttl
    age = stuck_age(lab)
    what = ", then ".join(_where(lab, n) for n in names)
    numbers = {"stuck_age": age, "lease_ttl": ttl}
    if age is None:
        return Finding(
            "watcher",
            False,
            f"{what} did not move a job out of Processing within {duration(STUCK_AGE_LIMIT)} "
            "of its claim: an expired job stays Processing",
            numbers,
        )
    problems: list[str] = []
    fine: list[str] = []
    with lab.trial():  # the move itself: the rows it writes, as the server counts them
        lab.enqueue(1)
        lab.claim("w0", T0)
        lab.watch(T0 + age + 1)
        written = lab.written
        plan = lab.plan(names[-1], id=1, now=T0 + age + 1)
    numbers["written"] = written
    fine.append(
        f"moves a job out of Processing {duration(age)} after its claim ({plan.describe()}; "
        f"{count(written, 'row')} written, as the server counts them)"
    )
    with lab.trial():
        lab.enqueue(1)
        lab.claim("w0", T0)
        before = lab.state(1)
        lab.watch(T0 + min(age, ttl) / 2)
        after = lab.state(1)
        live = after is None or _held(after) != _held(before)
    (problems if live else fine).append(
        "it requeues a job whose lease still runs" if live else "leaves a live lease alone"
    )
    with lab.trial():
        lab.enqueue(1)
        job, attempt = _claimed(lab, names[-1])
        finished = bool(lab.complete(1, "w0", attempt, T0 + 1))
        before = lab.state(1)  # Completed, or gone: a queue that deletes finished jobs
        late = T0 + age + 1
        if len(names) == 2:  # the write by id, on the job the read no longer returns
            lab.execute(names[0], now=late)
            lab.execute(names[1], id=1, now=late)
        else:
            lab.watch(late)
        after = lab.state(1)
        overwrote = finished and (before and before[3]) != (after and after[3])
    if finished:
        (problems if overwrote else fine).append(
            "its write overwrites a finished job (it does not re-check the job's state)"
            if overwrote
            else "leaves a finished job alone"
        )
    if len(names) == 2:
        with lab.trial():  # the write after the read: the job was taken again in between
            lab.enqueue(1)
            lab.claim("w0", T0)
            before = lab.state(1)
            lab.execute(names[1], id=1, now=T0 + 1)
            after = lab.state(1)
            fresh = after is None or _held(after) != _held(before)
        (problems if fresh else fine).append(
            "its write requeues a job whatever it became since the read (a job taken again in "
            "between goes back to Pending)"
            if fresh
            else "its write re-checks the job it read"
        )
    text = f"{what} " + ", ".join(fine)
    if problems:
        text += "; but " + "; ".join(problems)
    text += _retry_delay_text(lab, age, numbers)
    if abs(age - ttl) > max(1e-2 * ttl, 1.0):
        numbers["stuck_age_disagrees"] = True
        text += (
            f"; it takes a job as stuck {duration(age)} after its claim while policy.lease_ttl "
            f"is {duration(ttl)}: the scenario's leases are not the queue's (set lease_ttl = "
            f"{age:g} in queue.toml, or bind %(stuck_after)s in the watcher's statements)"
        )
    return Finding("watcher", not problems, text, numbers)
