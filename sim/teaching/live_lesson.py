"""What notebook 10 (live mode) computes: the two effects the closed form hides, and its exercise.

sim.teaching re-exports the checker, as it does every notebook's.
"""

from __future__ import annotations

import pandas as pd

from sim import analytic
from sim.comparison import PARTS
from sim.teaching.exercises import Verdict, _unanswered


def effects(run, comparison) -> pd.DataFrame:
    """Observed (live and simulated) against two predictions, for the parts the closed form gets wrong:
    the time since the last renewal at a crash (h'/2 for long jobs; less for short ones) and the wait
    for a poller (P'/(k + 1) for idle pollers; the busy workers' remaining work when all are busy)."""
    s = run.scenario
    p, lat = s.policy, s.workload.statement_latency.mean_value()
    jobs = s.workload.processing
    busy = p.workers - 1
    parts = comparison.parts
    rows = {
        "time since the last renewal (s)": {
            "live": p.lease_ttl - parts.loc["lease_remaining", "live"],
            "simulated": p.lease_ttl - parts.loc["lease_remaining", "simulated"],
            "closed form (long jobs)": (p.heartbeat_interval + lat) / 2,
            "corrected (this job length)": analytic.time_since_renewal_mean(
                jobs, heartbeat_interval=p.heartbeat_interval, latency=lat
            ),
        },
        "wait for a poller (s)": {
            "live": parts.loc["poll_wait", "live"] + parts.loc["watcher_wait", "live"],
            "simulated": parts.loc["poll_wait", "simulated"]
            + parts.loc["watcher_wait", "simulated"],
            "closed form (long jobs)": analytic.poll_wait_mean(
                poll_interval=p.poll_interval, idle_pollers=1, latency=lat
            ),
            "corrected (this job length)": analytic.poll_wait_mean(
                poll_interval=p.poll_interval,
                idle_pollers=0,
                busy_workers=busy,
                job_duration=jobs,
                latency=lat,
            ),
        },
    }
    return pd.DataFrame.from_dict(rows, orient="index")


def check_largest_part(answer, comparison):
    """10: which part of the live recovery is the largest: lease_remaining, watcher_wait or poll_wait?"""
    if answer is None:
        return _unanswered("look at the bars of the right-hand figure, or at `comparison.parts`.")
    if answer not in PARTS:
        return Verdict(
            False, f"Answer with one of {', '.join(map(repr, PARTS))}; {answer!r} is not a part."
        )
    live = comparison.parts["live"]
    largest = str(live.idxmax())
    if answer != largest:
        return Verdict(
            False,
            f"{answer} is {live[answer]:.3f} s on average, but {largest} is {live[largest]:.3f} s.",
        )
    why = (
        " A crashed owner's lease stays valid until it runs out, so the TTL, not the pollers, sets the recovery time."
        if largest == "lease_remaining"
        else ""
    )
    return Verdict(True, f"{largest}: {live[largest]:.3f} s of the {live.sum():.3f} s mean.{why}")
