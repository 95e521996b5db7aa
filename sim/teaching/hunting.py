"""Notebook 13 (sim hunt): a failure buried in noise for the shrinker to cut down, the table of
its steps, and the exercise on the shortest pause that lets a zombie complete."""

from __future__ import annotations

from dataclasses import replace

import pandas as pd

from sim.hunting.account import story
from sim.hunting.runner import execute, replay
from sim.hunting.shrink import shrink
from sim.hunting.space import Fault, Schedule, Scope
from sim.teaching.answers import Verdict, accepts, named_mistake, number, tolerance, unanswered


def noisy_failure(result, invariant: str) -> tuple[Scope, Schedule]:
    """The schedule `result` first found breaking `invariant`, with what it does not need put
    back, each piece kept only if it still breaks: the scope's horizon, another job, and faults
    after the damage is done (a partition and a crash of another worker, a database stall)."""
    scope = result.scope
    finding = result.findings[invariant]
    noisy = replace(finding.found.schedule, horizon=scope.horizon)
    late = max(step.t for step in finding.steps) + 1.0
    other = 1 if noisy.workers > 1 else 0
    pieces = [
        {"jobs": noisy.jobs + 1, "work": (*noisy.work, scope.work)},
        {"faults": (Fault("partition", other, late, 1.5),)},
        {"faults": (Fault("crash", other, late + 2.0),)},
        {"faults": (Fault("db_stall", -1, late + 5.0, 2.0),)},
    ]
    for piece in pieces:
        faults = tuple(sorted((*noisy.faults, *piece.get("faults", ()))))
        candidate = replace(noisy, **{**piece, "faults": faults})
        if invariant in execute(scope, candidate).broken:
            noisy = candidate
    return scope, noisy


def shrink_table(scope: Scope, schedule: Schedule, invariant: str) -> pd.DataFrame:
    """One row per step the shrinker kept, from the noisy schedule down: what it changed, the
    schedule's size, the records its run logs and the events its story tells (claims,
    completions, faults, expiries; not the idle polls nor the watcher's empty ticks)."""

    def breaks(s: Schedule) -> bool:
        return invariant in execute(scope, s).broken

    _, steps = shrink(schedule, breaks, scope, seconds=60)
    rows = []
    for what, s in [("as found, with the noise", schedule), *((x.what, x.schedule) for x in steps)]:
        run = replay(scope, s).run
        told = story(list(run.log), run.scenario, invariant, s.faults)
        rows.append(
            {
                "step": what,
                "workers": s.workers,
                "jobs": s.jobs,
                "faults": len(s.faults),
                "horizon": s.horizon,
                "records": len(run.log),
                "events": len(told),
            }
        )
    return pd.DataFrame(rows)


def shortest_pause(finding) -> float:
    """How long the zombie's pause must last at least: from its start until the other worker's
    claim of the job, so that the zombie's completion comes after it."""
    (pause,) = [f for f in finding.schedule.faults if f.kind == "pause"]
    taken = [
        s.t
        for s in finding.steps
        if s.kind == "claim" and s.worker != f"w{pause.worker}" and s.t > pause.at
    ]
    return taken[0] - pause.at


def check_shortest_pause(answer, finding) -> Verdict:
    """13: the shortest pause of the paused worker, started where the hunt starts it, after
    which its late completion lands once another worker holds the job."""
    if answer is None:
        return unanswered(
            "the pause starts just before the worker completes; what must have happened before "
            "it wakes?"
        )
    value = number(answer)
    truth = shortest_pause(finding)
    p = finding.scenario.policy
    mistakes = {
        "the TTL: but the lease was already running when the pause began": p.lease_ttl,
        "the TTL plus a watcher interval: but this claim takes an expired lease itself, "
        "no watcher is needed": p.lease_ttl + p.watcher_interval,
    }
    within = tolerance(truth, mistakes, cap=0.5)
    if value is None:
        return Verdict(False, f"Give a number of seconds; {answer!r} is not one.")
    if accepts(value, truth, mistakes, within):
        return Verdict(
            True,
            f"About {truth:.3f} s: the lease must expire and the other worker must claim the job "
            "before the paused one wakes; any shorter and it completes a job still its own.",
        )
    named = named_mistake(value, mistakes, within)
    return Verdict(
        False,
        f"{value:g} s is not it.{named} Read the timeline: when does the other worker take the "
        "job?",
    )
