"""Item 4: a watcher runs periodically, so expired jobs do not stay Processing. Expired leases and
how long their jobs waited to leave Processing, and by what (the watcher, a claim, their owner);
crashed owners' jobs recovered; harm the watcher's own writes did. Without an expired lease in
the scenario, the crashes variant exercises it."""

from __future__ import annotations

import numpy as np

from sim.checklist.evidence import Evidence
from sim.checklist.verdicts import FAIL, PASS, RISK, UNTESTED, Verdict
from sim.db.base import JobState
from sim.model.events import STATUS_MOVES
from sim.results import owner_crashes
from sim.scenario.settings import recovery_allowance
from sim.support.in_words import count, duration

KEY = "watcher"
TITLE = "4. A watcher runs periodically: expired jobs do not stay Processing"


def check(evidence: Evidence) -> Verdict:
    used, expired, variant = _judged_runs(evidence)
    pairs = [requeue_waits(r) for r in used]
    waits = np.concatenate([w for w, _ in pairs]) if pairs else np.array([])
    how = [kind for _, kinds in pairs for kind in kinds]
    recovery = (
        np.concatenate([owner_crashes(r)["latency"].to_numpy(float) for r in used])
        if used
        else np.array([])
    )
    m = _numbers(evidence, used, expired, waits, how, recovery)
    return _verdict(evidence, m, _moved(m, how, variant, recovery))


def expired_leases(run) -> int:
    """Leases that ran out without being finished, early enough for recovery to fit in the
    horizon."""
    leases = run.leases
    late = run.scenario.horizon - recovery_allowance(run.scenario)
    return int((leases["end_reason"].isin(["crashed", "expired"]) & (leases["until"] < late)).sum())


def requeue_waits(run) -> tuple[np.ndarray, list[str]]:
    """Per expired lease: lease end -> the job left Processing (requeued, released or failed by a
    deadline, re-claimed or done), NaN if never; and the kind of record that moved it."""
    leases = run.leases
    late = run.scenario.horizon - recovery_allowance(run.scenario)
    ended = leases[leases["end_reason"].isin(["crashed", "expired"]) & (leases["until"] < late)]
    events = run.events
    kinds = events["kind"]
    moved = kinds.isin(["claim", "complete", "payload_conflict"]) | (
        kinds.isin(STATUS_MOVES) & events["detail"].notna()  # a move that found no row: none
    )
    moves = events[moved]
    by_job = {job: (g["t"].to_numpy(), g["kind"].to_numpy()) for job, g in moves.groupby("job")}
    waits, how = [], []
    for lease in ended.itertuples():
        t, kinds = by_job.get(lease.job, (np.array([]), np.array([])))
        later = np.flatnonzero(t > lease.start)
        if len(later):
            waits.append(max(0.0, t[later[0]] - lease.until))
            how.append(str(kinds[later[0]]))
        else:
            waits.append(np.nan)
    return np.asarray(waits, dtype=float), how


def _judged_runs(evidence: Evidence) -> tuple[list, int, str]:
    """(the runs whose expired leases are judged, how many expired, words naming the variant):
    the scenario's runs, or the crashes variant's when no lease of theirs expired."""
    expired = sum(expired_leases(r) for r in evidence.runs)
    if expired:
        return evidence.runs, expired, ""
    crashed = evidence.variant("crashes")
    if not crashed:
        return evidence.runs, expired, ""
    evidence.use(KEY, "crashes")
    owners = sum(len(owner_crashes(r)) for r in crashed)
    variant = f" (crash variant: {owners} job owners crashed mid-work)"
    return crashed, sum(expired_leases(r) for r in crashed), variant


def _numbers(evidence: Evidence, used, expired: int, waits, how: list[str], recovery) -> dict:
    """What the watcher did: its ticks (in the scenario's runs), the expired leases and how their
    jobs moved, crashed owners' recovery, and the harm of its writes."""
    runs = evidence.runs
    seen = runs if used is runs else runs + used
    ticks = [r.events.loc[r.events["kind"] == "watcher_tick", "t"].to_numpy() for r in runs]
    recovered = recovery[np.isfinite(recovery)]
    return {
        "watcher_ticks": sum(len(t) for t in ticks),
        "largest_tick_gap": max(
            (float(np.diff(t).max()) for t in ticks if len(t) > 1), default=np.nan
        ),
        "expired_leases": expired,
        "never_moved": int(np.isnan(waits).sum()) if len(waits) else 0,
        "max_wait_after_expiry": (
            float(np.nanmax(waits)) if len(waits) and np.isfinite(waits).any() else np.nan
        ),
        "stuck_processing": sum(
            evidence.report(r).counts().get("stuck_processing", 0) for r in used
        ),
        "watcher_dead": sum(
            int(((r.events["kind"] == "requeue") & (r.events["detail"] == JobState.DEAD)).sum())
            for r in used
        ),
        "moved_by_watcher": how.count("requeue"),
        "moved_by_claim": how.count("claim"),
        "owner_crashes": len(recovery),
        "recovery_latency_mean": float(recovered.mean()) if len(recovered) else np.nan,
        "recovery_latency_max": float(recovered.max()) if len(recovered) else np.nan,
        "watcher_overwrites": evidence.caused(seen, "terminal_overwritten", "watcher"),
        "watcher_double_claims": evidence.caused(
            seen + evidence.variants.get("contention", []), "double_claim", "watcher"
        ),
    }


def _moved(m: dict, how: list[str], variant: str, recovery) -> str:
    """How the expired leases' jobs left Processing, and how fast crashed owners' jobs were
    claimed again."""
    expired, never = m["expired_leases"], m["never_moved"]
    by_watcher, by_claim = m["moved_by_watcher"], m["moved_by_claim"]
    given_back = how.count("deadline") + how.count("release")
    finished = len(how) - by_watcher - by_claim - given_back
    back = (
        f", {given_back} given back by their owner (failed at its deadline, or released)"
        if given_back
        else ""
    )
    moved = (
        f"{expired - never} of {expired} expired leases{variant} moved out of Processing "
        f"({by_watcher} by the watcher, {by_claim} taken by a claim{back}, {finished} finished "
        "by their owner)"
        if expired
        else f"no lease expired{variant}"
    )
    if expired and expired > never:
        moved += f", at most {duration(m['max_wait_after_expiry'])} after expiry"
    if len(recovery):
        recovered = int(np.isfinite(recovery).sum())
        moved += f"; {recovered} of {len(recovery)} crashed owners' jobs claimed again"
        if recovered:
            moved += (
                f", {duration(m['recovery_latency_mean'])} after the crash on average "
                f"(max {duration(m['recovery_latency_max'])})"
            )
    return moved


def _harm(m: dict) -> str:
    """What the watcher's own writes broke: finished jobs overwritten, held jobs handed on."""
    overwrote, handed = m["watcher_overwrites"], m["watcher_double_claims"]
    return "; ".join(
        text
        for n, text in (
            (
                overwrote,
                f"its write overwrote {count(overwrote, 'finished job')} "
                "(terminal_overwritten: made Pending or Dead after Completed or Dead)",
            ),
            (
                handed,
                f"it made {count(handed, 'job')} Pending while a live lease held it, and a "
                "second worker took it (double_claim)",
            ),
        )
        if n
    )


def _verdict(evidence: Evidence, m: dict, moved: str) -> Verdict:
    """A watcher must move every expired job on and harm none; without one, the claim must take
    expired leases itself."""
    p = evidence.policy
    stuck, never, harm = m["stuck_processing"], m["never_moved"], _harm(m)
    if p.watcher:
        head = (
            f"watcher every {p.watcher_interval:g} s: {count(m['watcher_ticks'], 'tick')} in "
            f"{evidence.n_runs}, largest gap {duration(m['largest_tick_gap'])}"
        )
        if p.watcher_action == "dead":
            return (
                RISK,
                f"{head}; it marks every expired job Dead instead of retrying: "
                f"{count(m['watcher_dead'], 'job')} failed; {moved}.",
                m,
            )
        if stuck or never or harm:
            harm = f"; {harm}" if harm else ""
            return (
                FAIL,
                f"{head}; {moved}; {count(stuck, 'stuck_processing violation')}{harm}.",
                m,
            )
        status = PASS if m["expired_leases"] else UNTESTED
        tail = "" if m["expired_leases"] else ": recovery not exercised"
        return status, f"{head}; {moved}{tail}; 0 stuck.", m
    if p.claim_takes_expired:
        head = "no watcher: the claim itself takes expired leases"
        if stuck or never:
            return (
                RISK,
                f"{head}; {moved}; {count(stuck, 'stuck_processing violation')} (no idle "
                "worker to take them).",
                m,
            )
        if not m["expired_leases"]:
            return UNTESTED, f"{head}; {moved}: recovery not exercised; 0 stuck.", m
        return PASS, f"{head}; {moved}; 0 stuck.", m
    why = "" if never else ", but nothing would move an expired lease out of Processing"
    return (
        FAIL,
        f"no watcher and the claim skips expired leases: {moved}; {count(never, 'job')} stayed "
        f"Processing{why}.",
        m,
    )
