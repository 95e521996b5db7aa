"""Notebook 12, second half: clocks. How long a worker may trust its own lease (conservative by
the round trip and the drift bound, as Chubby's client is), what drift in parts per million and a
clock step do to a lease, and why one clock, the database's, is the safe default.

Lease Lab models a worker's clock as the database's plus a constant offset (policy.clock =
"worker", faults.clock_skew): what a clock step leaves behind. Drift (a rate error) arrives with
the clock work of the peers issue; until then drift is computed here, not simulated.
"""

from __future__ import annotations

from collections.abc import Iterable

import pandas as pd

from sim.scenario import Scenario, preset
from sim.teaching.exercises import Verdict, _named_mistake, _number, _tolerance, _unanswered

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
        return _unanswered(
            "when did the server start the lease, at the latest? And how much less than the TTL "
            "can a slow local clock show?"
        )
    truth = safe_deadline(sent_at=sent_at, ttl=ttl, drift_ppm=drift_ppm)
    mistakes = deadline_mistakes(
        sent_at=sent_at, received_at=received_at, ttl=ttl, drift_ppm=drift_ppm
    )
    tolerance = _tolerance(truth, mistakes, 0.001)
    value = _number(answer)
    if value is None:
        return Verdict(False, f"Give a local time in seconds; {answer!r} is not a number.")
    if abs(value - truth) <= tolerance:
        return Verdict(
            True,
            f"{truth:.6g} s = sent at {sent_at:g} s + {ttl:g} s x (1 - {drift_ppm:g} ppm): "
            f"{received_at - sent_at + ttl * drift_ppm * PPM:.3g} s before a naive "
            f"{received_at + ttl:.6g} s (the reply plus the TTL). Chubby's client keeps its lease "
            "timeout conservative the same way: the reply's time in flight, and how fast the "
            "master's clock may run.",
        )
    named = _named_mistake(value, mistakes, tolerance)
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


def renewal_margins(run, drift_ppm: float) -> pd.DataFrame:
    """For each renewal of `run` (claims and recorded heartbeats; a constant statement latency d,
    the time from send to execution), where the lease ends on the database's clock, and where, on
    the same clock, the worker's own view of it can end at worst when its clock runs slow by
    `drift_ppm`: counted from the reply with the full TTL (naive), or from the send with
    TTL x (1 - drift) (conservative). Margin: the database's end minus the worker's."""
    latency = run.scenario.workload.statement_latency
    if latency.kind != "constant":
        raise ValueError("renewal_margins: needs a constant statement latency (the send time)")
    if run.scenario.policy.clock != "db":
        raise ValueError("renewal_margins: needs policy.clock = 'db' (one clock judges the lease)")
    ttl, d, rho = run.scenario.policy.lease_ttl, latency.value, drift_ppm * PPM
    events = run.events
    renewals = events[events["kind"].isin(["claim", "heartbeat"])]
    executed = renewals["t"].to_numpy(float)
    db_end = renewals["detail"].to_numpy(float)
    slow = 1 - rho  # a local second lasts 1 / (1 - rho) seconds of database time
    naive = executed + ttl / slow
    conservative = executed - d + ttl * (1 - rho) / slow
    return pd.DataFrame(
        {
            "kind": renewals["kind"].to_numpy(),
            "worker": renewals["worker"].to_numpy(),
            "db_end": db_end,
            "naive_margin": db_end - naive,
            "conservative_margin": db_end - conservative,
        }
    )


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
                    **{
                        metric: sum(int(r.summary[metric]) for r in runs)
                        for metric in (
                            "leases",
                            "double_claims",
                            "false_expiries",
                            "duplicate_external_effects",
                        )
                    },
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
