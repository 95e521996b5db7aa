"""Which time scales a live run can honour: statement latency must stay small beside the scenario's times.

A statement's wall latency counts in scenario time as latency / scale. Shrink the scale far enough
and a claim or a heartbeat takes a noticeable share of a poll or heartbeat interval: the run then
measures the database's round trips, not the lease policy. The runner measures the round trip of
a named statement on the server first and refuses a scale at which its median exceeds MAX_SHARE of
the shortest interval of the scenario. The median, not a tail quantile: a busy machine's tail comes
and goes, and the live run warns about it afterwards (LiveRun.overload) from every statement it ran.
"""

from __future__ import annotations

import time

import numpy as np

from sim.db.queries import QUERY_DEFAULTS
from sim.errors import ConfigError

MAX_SHARE = 0.05
PROBES = 100
WARM_UP = 10  # first executions pay for connection warm-up and statement preparation


def shortest_interval(scenario) -> tuple[str, float]:
    """The scenario's shortest timing setting that statement latency competes with, and its name."""
    p = scenario.policy
    candidates = [("policy.poll_interval", p.poll_interval), ("policy.lease_ttl", p.lease_ttl)]
    if p.heartbeat:
        candidates.append(("policy.heartbeat_interval", p.heartbeat_interval))
    if p.watcher:
        candidates.append(("policy.watcher_interval", p.watcher_interval))
    return min(candidates, key=lambda kv: kv[1])


def probe_latency(connection, probes: int = PROBES, *, missing=()) -> float:
    """Median wall seconds of a named read-only statement on this server: the claim's read
    (select_candidates), or the dump of Lease Lab's own dedup table when a user's queue has no such read."""
    name, params = (
        "select_candidates",
        {"take_expired": True, "max_attempts": QUERY_DEFAULTS["max_attempts"], "limit": 1},
    )
    if name in missing:
        name, params = "dump_processed_events", {}
    samples = []
    for _ in range(WARM_UP):
        connection.run(name, dict(params), at=0.0)
    for _ in range(probes):
        start = time.monotonic()
        connection.run(name, dict(params), at=0.0)
        samples.append(time.monotonic() - start)
    return float(np.median(samples))


def check_scale(scenario, scale: float, latency: float) -> None:
    """ConfigError naming --time-scale when latency / scale exceeds MAX_SHARE of the shortest interval."""
    if not (scale > 0 and np.isfinite(scale)):
        raise ConfigError(
            f"--time-scale: must be a number > 0 (wall seconds per scenario second), got {scale!r}"
        )
    key, interval = shortest_interval(scenario)
    share = latency / scale / interval
    if share > MAX_SHARE:
        least = latency / (MAX_SHARE * interval)
        raise ConfigError(
            f"--time-scale {scale:g}: a statement takes {latency * 1000:.1f} ms (median) on this server, "
            f"{latency / scale:.3g} s of scenario time, {share:.0%} of {key} {interval:g} s; above {MAX_SHARE:.0%} "
            f"latency, not the lease policy, would dominate: use --time-scale >= {least:.2g}"
        )
