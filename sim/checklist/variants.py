"""The variants a review runs when the scenario alone cannot exercise an item, each built from the
scenario and one of its runs (same seed): contention, crashes, zombie, duplicates, no-heartbeat
(sim.checklist.design_review says what each is for)."""

from __future__ import annotations

import dataclasses

import pandas as pd

from sim.scenario.dists import Dist
from sim.scenario.settings import CrashPoint, Scenario, ScriptedCrash, ScriptedOutage


def variant_scenario(name: str, scenario: Scenario, base) -> Scenario | None:
    """The variant `name` of `scenario` for the seed of run `base`; None when it would add
    nothing (the scenario is already that contended, or no finished job to script a fault on)."""
    if name not in VARIANTS:
        raise ValueError(name)
    return VARIANTS[name](scenario.replace(seed=base.scenario.seed), base)


def ahead_of_time(scenario: Scenario) -> tuple[str, ...]:
    """The variants every review with variants asks for, built from the scenario and a seed alone,
    so that they can run beside the scenario's own runs: contention (item 1), no-heartbeat (item
    3, when the heartbeat is on), duplicates (dedup and PSP)."""
    return (
        ("contention", "no-heartbeat", "duplicates")
        if scenario.policy.heartbeat
        else (
            "contention",
            "duplicates",
        )
    )


def seed_variant(name: str, scenario: Scenario, seed: int) -> Scenario | None:
    """A variant of ahead_of_time(): the same as variant_scenario() with a run of that seed."""
    return VARIANTS[name](scenario.replace(seed=seed), None)


def spread(frame: pd.DataFrame, k: int) -> pd.DataFrame:
    """k rows spread over the frame (at its 1/(k+1), 2/(k+1), ... positions)."""
    if frame.empty:
        return frame
    positions = sorted({min(len(frame) - 1, int(len(frame) * (i + 1) / (k + 1))) for i in range(k)})
    return frame.iloc[positions]


def contention(s: Scenario, base) -> Scenario | None:
    """8+ workers on a 200-job batch, to exercise the claim."""
    p, w = s.policy, s.workload
    if p.workers >= 8 and w.arrival == "batch" and w.jobs >= 200:
        return None  # the scenario is already that contended
    return s.with_overrides(
        {
            "name": f"{s.name}+contention",
            "policy.workers": max(8, p.workers),
            "workload.arrival": "batch",
            "workload.jobs": 200,
            "horizon": min(s.horizon, 120.0),
        }
    )


def no_heartbeat(s: Scenario, base) -> Scenario | None:
    """The same runs without heartbeats, to show what the heartbeat prevents."""
    return s.with_overrides({"name": f"{s.name}+no-heartbeat", "policy.heartbeat": False})


def _recovery_margin(s: Scenario) -> float:
    """Seconds for a lost lease to expire and its job to be claimed again, with room to spare."""
    p = s.policy
    return p.lease_ttl + (p.watcher_interval if p.watcher else 0.0) + 2 * p.poll_interval + 5.0


def _completed(base) -> pd.DataFrame:
    """The base run's completed leases, by start."""
    leases = base.leases
    return leases[leases["outcome"] == "completed"].sort_values("start")


def crashes(s: Scenario, base) -> Scenario | None:
    """The owners of three jobs that completed in the base run crash mid-work (scripted by job)."""
    done, margin, f = _completed(base), _recovery_margin(s), s.faults
    pick = spread(done[done["start"] + margin < s.horizon * 0.9], 3)
    scripted = tuple(
        ScriptedCrash(at=float((row.start + row.released_at) / 2), job=int(row.job))
        for row in pick.itertuples()
    )
    if not scripted:
        return None
    return s.replace(
        name=f"{s.name}+crashes", faults=dataclasses.replace(f, crashes=f.crashes + scripted)
    )


def zombie(s: Scenario, base) -> Scenario | None:
    """The owners of two jobs are paused long enough to lose their lease, then carry on
    (abandon_on_lost_lease off, random crashes off)."""
    p, f = s.policy, s.faults
    if p.workers < 2:
        return None
    done, margin = _completed(base), _recovery_margin(s)
    pause = margin + 5.0
    pick = spread(done[done["start"] + pause + margin < s.horizon * 0.9], 2)
    pauses = tuple(
        ScriptedOutage(
            worker=int(str(row.worker).lstrip("w")),
            at=float((row.start + row.released_at) / 2),
            duration=pause,
        )
        for row in pick.itertuples()
    )
    if not pauses:
        return None
    return s.replace(
        name=f"{s.name}+zombie",
        faults=dataclasses.replace(f, pauses=f.pauses + pauses, crash_rate=0.0),
        policy=dataclasses.replace(p, abandon_on_lost_lease=False),
    )


def duplicates(s: Scenario, base) -> Scenario | None:
    """20% of events delivered twice and up to three crashes right after the PSP call."""
    f, w = s.faults, s.workload
    points = tuple(cp for cp in f.crash_points if cp.point != "after_psp") + (
        CrashPoint(point="after_psp", probability=0.5, limit=3),
    )
    workload = (
        w
        if w.duplicate_delivery >= 0.2
        else dataclasses.replace(
            w,
            duplicate_delivery=0.2,
            redelivery_delay=w.redelivery_delay
            if w.redelivery_delay.mean_value() > 0
            else Dist.exponential(2.0),
        )
    )
    return s.replace(
        name=f"{s.name}+duplicates",
        workload=workload,
        faults=dataclasses.replace(f, crash_points=points),
    )


VARIANTS = {
    "contention": contention,
    "crashes": crashes,
    "zombie": zombie,
    "duplicates": duplicates,
    "no-heartbeat": no_heartbeat,
}
