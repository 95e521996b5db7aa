"""Notebook 12, second half: clocks. How long a worker may trust its own lease (conservative by
the round trip and the drift bound, as Chubby's client is: arithmetic), what drift in parts per
million and a clock step do to a lease, why one clock, the database's, is the safe default
against workers' clocks that disagree, and what a step of that one clock does (simulated:
faults.db_clock_steps).
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pandas as pd

from sim.errors import ConfigError
from sim.scenario.settings import Scenario, preset
from sim.teaching.answers import (
    Verdict,
    accepts,
    named_mistake,
    number,
    tolerance,
    unanswered,
)

PPM = 1e-6


# ---- a client-side lease -------------------------------------------------------------------------


def safe_deadline(*, sent_at: float, ttl: float, drift_ppm: float) -> float:
    """The local time until which a client may act on a lease the server granted for `ttl` seconds
    in reply to a request the client sent at local time `sent_at`, when its clock may run slower
    than the server's by up to `drift_ppm` parts per million: the server started the lease after
    the request left (so count from the send, not the reply), and a slow local clock shows less
    than the time that passed (so count only ttl x (1 - drift))."""
    return sent_at + ttl * (1 - drift_ppm * PPM)


def deadline_mistakes(
    *, sent_at: float, received_at: float, ttl: float, drift_ppm: float
) -> dict[str, float]:
    """The usual slips of safe_deadline(), by name."""
    rho = drift_ppm * PPM
    return {
        (
            "counted from the reply: the server started the lease when it received the request, "
            f"up to the round trip ({received_at - sent_at:.3g} s) before the reply arrived"
        ): received_at + ttl * (1 - rho),
        (
            "the full TTL on the local clock: a clock slower than the server's by "
            f"{drift_ppm:g} ppm shows {ttl * rho * 1000:.3g} ms less than the TTL that passed"
        ): sent_at + ttl,
        (
            "the drift added instead of taken off: only a shorter local lease is on the safe side"
        ): sent_at + ttl * (1 + rho),
        "counted from the reply, with the full TTL: both slips at once": received_at + ttl,
        f"the drift read as a percentage: {drift_ppm:g} ppm is {drift_ppm * 1e-4:g}%, "
        f"{drift_ppm:g} millionths": sent_at + ttl * (1 - drift_ppm / 100),
    }


def check_safe_deadline(
    answer, *, sent_at: float, received_at: float, ttl: float, drift_ppm: float
) -> Verdict:
    """12: until which local time may the worker act on its lease? Within a millisecond, and less
    than half the gap to each common slip (deadline_mistakes), which is named when made."""
    if answer is None:
        return unanswered(
            "when did the server start the lease, at the latest? And how much less than the TTL "
            "can a slow local clock show?"
        )
    truth = safe_deadline(sent_at=sent_at, ttl=ttl, drift_ppm=drift_ppm)
    mistakes = deadline_mistakes(
        sent_at=sent_at, received_at=received_at, ttl=ttl, drift_ppm=drift_ppm
    )
    within = tolerance(truth, mistakes, 0.001)
    value = number(answer)
    if value is None:
        return Verdict(False, f"Give a local time in seconds; {answer!r} is not a number.")
    if accepts(value, truth, mistakes, within):
        return Verdict(
            True,
            f"{truth:.6g} s = sent at {sent_at:g} s + {ttl:g} s x (1 - {drift_ppm:g} ppm): "
            f"{received_at - sent_at + ttl * drift_ppm * PPM:.3g} s before a naive "
            f"{received_at + ttl:.6g} s (the reply plus the TTL). Chubby's client keeps its lease "
            "timeout conservative the same way: the reply's time in flight, and how fast the "
            "master's clock may run.",
        )
    named = named_mistake(value, mistakes, within)
    if named:
        where = named.strip() + " "
    elif value < truth:
        where = (
            f"{value:.6g} s is safe, but {truth - value:.3g} s earlier than it needs to be: give "
            "the latest safe moment, to the millisecond. "
        )
    else:
        where = f"{value:.6g} s is after the safe deadline: the worker could act on a lost lease. "
    return Verdict(
        False,
        where + "Start from the moment the request left, and take the drift bound off the TTL.",
    )


def drift_seconds(ppm: float, span: float) -> float:
    """How far a clock whose rate is off by `ppm` parts per million strays over `span` seconds."""
    return ppm * PPM * span


def _short(seconds: float) -> str:
    """'30 µs', '1.5 ms', '4.32 s': a small duration in the unit that reads best."""
    if seconds < 1e-3:
        return f"{seconds * 1e6:.3g} µs"
    if seconds < 1.0:
        return f"{seconds * 1e3:.3g} ms"
    return f"{seconds:.3g} s"


def drift_table(
    ppms: Iterable[float] = (1.0, 50.0, 200.0),
    spans: dict[str, float] | None = None,
) -> pd.DataFrame:
    """How far a clock drifting at each rate strays over each span (drift_seconds), in words: a
    rate error adds up with the time since the clock was last corrected."""
    spans = spans or {"a 30 s lease": 30.0, "an hour": 3600.0, "a day": 86400.0}
    table = pd.DataFrame(
        {name: [_short(drift_seconds(ppm, span)) for ppm in ppms] for name, span in spans.items()},
        index=[f"{ppm:g} ppm" for ppm in ppms],
    )
    table.index.name = "drift"
    return table


def worst_case_margins(*, ttl: float, round_trip: float, drift_ppm: float) -> pd.DataFrame:
    """Arithmetic, not a measurement: for each way a worker may count its lease, how long before
    the database's deadline its own view ends at worst (negative: after it, the worker acts on a
    lease it lost). At worst the database started the lease as the request left (a round trip
    before the reply), and a clock slow by `drift_ppm` counts a local second in 1 / (1 - drift)
    real ones."""
    slow = 1 - drift_ppm * PPM
    ways = {  # (counted from, local seconds counted)
        "from the reply, the full TTL": (round_trip, ttl),
        "from the reply, TTL x (1 - drift)": (round_trip, ttl * slow),
        "from the send, the full TTL": (0.0, ttl),
        "from the send, TTL x (1 - drift)": (0.0, ttl * slow),
    }
    frame = pd.DataFrame(
        {
            "worst margin (ms)": [
                round(1000 * (ttl - start - local / slow), 6) + 0.0  # to the nanosecond, no -0
                for start, local in ways.values()
            ]
        },
        index=list(ways),
    )
    frame.index.name = "the worker counts its lease"
    return frame


# ---- clocks that disagree ------------------------------------------------------------------------


def skewed_queue(*, jobs: int = 200, seed: int = 1) -> Scenario:
    """The baseline queue with each worker's own clock (policy.clock = "worker"): every statement
    binds the worker's time, offset from the database's by a normal draw of faults.clock_skew
    seconds. TTL 10 s, heartbeat every 3 s, jobs of median 8 s (p99 40 s), no idempotency key, and
    a constant statement latency of 20 ms (the time from a statement's send to its execution)."""
    return preset("baseline").with_overrides(
        {
            "name": "skewed-clocks",
            "policy.clock": "worker",
            "policy.lease_ttl": 10.0,
            "policy.heartbeat_interval": 3.0,
            "policy.idempotency_key": False,
            "workload.processing": {"kind": "lognormal", "median": 8.0, "p99": 40.0},
            "workload.rate": 0.3,
            "workload.statement_latency": 0.02,
            "workload.jobs": jobs,
            "horizon": jobs / 0.3 + 240.0,
            "seed": seed,
            "expect": [],
        }
    )


def _totals(runs) -> dict[str, int]:
    """What the clock experiments count, summed over their runs."""
    metrics = ("leases", "double_claims", "false_expiries", "duplicate_external_effects")
    return {metric: sum(int(r.summary[metric]) for r in runs) for metric in metrics}


def skew_experiment(
    skews: Iterable[float], *, jobs: int = 200, seeds: Iterable[int] = (1, 2, 3)
) -> pd.DataFrame:
    """Per clock skew (the standard deviation of the workers' offsets), with worker clocks and,
    at the same skew, with the database's clock: leases, leases another worker took while their
    owner still held them by its own clock (double claims), false expiries, charges twice."""
    from sim import runner

    base, seeds = skewed_queue(jobs=jobs), tuple(seeds)
    rows = []
    for skew in skews:
        for clock in ("worker", "db"):
            skewed = base.with_overrides({"faults.clock_skew": float(skew), "policy.clock": clock})
            runs = [runner.run(skewed, seed=s) for s in seeds]
            rows.append(
                {
                    "clock_skew": float(skew),
                    "clock": clock,
                    **_totals(runs),
                }
            )
    return pd.DataFrame(rows)


def taken_early(run) -> pd.DataFrame:
    """Each lease another worker claimed while its owner still held it by its own clock: the two
    clocks' offsets from the database's and how far apart they were, beside the slack a lease
    has between renewals (TTL - heartbeat interval - statement latency p99)."""
    leases = run.leases[run.leases["end_reason"] == "revoked"]
    skews = run.worker_skews
    p = run.scenario.policy
    slack = (
        p.lease_ttl - p.heartbeat_interval - run.scenario.workload.statement_latency.quantile(0.99)
    )
    frame = pd.DataFrame(
        {
            "job": leases["job"].to_numpy(),
            "owner": leases["worker"].to_numpy(),
            "taker": leases["revoked_by"].to_numpy(),
            "owner_offset": [skews.get(w, 0.0) for w in leases["worker"]],
            "taker_offset": [skews.get(w, 0.0) for w in leases["revoked_by"]],
        }
    )
    frame["apart"] = frame["taker_offset"] - frame["owner_offset"]
    frame["slack"] = slack
    return frame


def taken_early_scene(run, margin: float = 2.0) -> dict:
    """Where a figure of `run` shows a lease taken early: the first one whose owner, a zombie by
    then, was refused its completion (else the first taken early), its owner and taker, and a
    window from its claim to the refusal (or to the owner's letting go), `margin` seconds wider
    each side; lease_timeline(run, window=..., workers=...) draws it."""
    leases = run.leases[run.leases["end_reason"] == "revoked"]
    if leases.empty:
        raise ConfigError("taken_early_scene: no lease of this run was taken early")
    events = run.events
    refused = events[events["kind"] == "complete_rejected"]
    chosen, refused_at = leases.iloc[0], None
    for lease in leases.itertuples():
        hit = refused[
            (refused["job"] == lease.job)
            & (refused["worker"] == lease.worker)
            & (refused["attempt"] == lease.attempt)
        ]
        if len(hit):
            chosen, refused_at = leases.loc[lease.Index], float(hit["t"].iloc[0])
            break
    end = refused_at if refused_at is not None else float(chosen["released_at"])
    if not np.isfinite(end):
        end = float(chosen["revoked_at"])
    owner, taker = str(chosen["worker"]), str(chosen["revoked_by"])
    return {
        "job": int(chosen["job"]),
        "owner": owner,
        "taker": taker,
        "taken_at": float(chosen["revoked_at"]),
        "refused_at": refused_at,
        "window": (float(chosen["start"]) - margin, end + margin),
        "workers": sorted({owner, taker}, key=lambda w: int(w.lstrip("w"))),
    }


# ---- the database's clock steps ------------------------------------------------------------------


def db_step_experiment(
    step: float, *, jobs: int = 200, seeds: Iterable[int] = (1, 2, 3)
) -> pd.DataFrame:
    """skewed_queue() on the database's clock (every statement binds it; no worker clock), without
    and with two steps of that clock by `step` seconds, at a third and two thirds of the horizon
    (an NTP step on its host, a failover to a replica whose clock differs: faults.db_clock_steps):
    leases, leases taken while their owner still renewed them (double claims), false expiries,
    charges twice."""
    from sim import runner

    base = skewed_queue(jobs=jobs).with_overrides({"policy.clock": "db"})
    seeds = tuple(seeds)
    rows = []
    for by in (0.0, float(step)):
        steps = [{"at": base.horizon * k / 3, "by": by} for k in (1, 2)] if by else []
        stepped = base.with_overrides({"faults.db_clock_steps": steps})
        runs = [runner.run(stepped, seed=s) for s in seeds]
        rows.append(
            {
                "db_clock_step": by,
                "steps": len(steps),
                **_totals(runs),
            }
        )
    return pd.DataFrame(rows)


def step_back_recovery(step: float = -60.0, *, crash_at: float = 12.0, at: float = 14.0) -> dict:
    """One job (lessons.one_job: TTL 15 s, heartbeat and watcher every 5 s) whose owner crashes at
    `crash_at`, its lease stamped before the database's clock steps by `step` at `at`: when the
    job was claimed again, with and without the step. A step back lengthens every lease stamped
    before it by the step."""
    from sim import runner
    from sim.teaching.lessons import one_job

    scene = one_job(crash_at=crash_at)
    calm = runner.run(scene)
    stepped = runner.run(scene.with_overrides({"faults.db_clock_steps": [{"at": at, "by": step}]}))
    return {
        "crash_at": crash_at,
        "step_at": at,
        "step": step,
        "stamped_until": float(calm.leases.iloc[0]["until"]),
        "reclaimed": float(calm.recoveries["reclaimed_at"].iloc[0]),
        "reclaimed_after_step": float(stepped.recoveries["reclaimed_at"].iloc[0]),
    }
