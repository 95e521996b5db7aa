"""Closed-form predictions that tests and plots put beside simulated results.

Recovery latency (DESIGN.md "Theory"): the owner crashes at C while holding a job whose last
renewal was at R, so its lease ends at E = R + L. Assumptions: the crash falls at a random phase
of the heartbeat cycle, so C - R ~ U(0, h') where h' = h + one statement latency (the heartbeat
loop sleeps h after each renewal); light load: k workers are idle and poll with independent
random phases every P' = P + one latency (a poll is a select, then a sleep of P); the watcher,
when it does the requeue, ticks every W' = W + one latency from a random phase. Then

    recovery = (E - C) + watcher wait + poll wait + claim statement
    mean     = L - h'/2 + [W'/2 + latency] + P'/(k + 1) + latency

Without heartbeats R is the claim time and E - C = L - (time already worked at the crash).
"""

from __future__ import annotations


def recovery_latency_mean(*, ttl: float, heartbeat_interval: float | None, poll_interval: float,
                          watcher_interval: float | None = None, idle_pollers: int = 1,
                          latency: float = 0.0, worked_at_crash: float | None = None) -> float:
    """Mean time from an owner's crash to the job's next claim (see the module docstring).

    heartbeat_interval=None means no heartbeat: pass worked_at_crash (mean time worked at the crash).
    watcher_interval=None means the claim itself takes expired leases (no watcher step).
    """
    if heartbeat_interval is None:
        if worked_at_crash is None:
            raise ValueError("without heartbeats, give worked_at_crash")
        lease_left = ttl - worked_at_crash
    else:
        if heartbeat_interval >= ttl:
            raise ValueError("the formula needs heartbeat_interval < ttl")
        lease_left = ttl - (heartbeat_interval + latency) / 2
    watcher_wait = 0.0 if watcher_interval is None else (watcher_interval + latency) / 2 + latency
    poll_wait = (poll_interval + latency) / (idle_pollers + 1)
    return lease_left + watcher_wait + poll_wait + latency


def recovery_latency_variance(*, heartbeat_interval: float, poll_interval: float,
                              watcher_interval: float | None = None, idle_pollers: int = 1,
                              latency: float = 0.0) -> float:
    """Variance of the recovery latency under the same assumptions (sum of independent uniforms;
    the poll wait is the minimum of k uniforms)."""
    h, p, k = heartbeat_interval + latency, poll_interval + latency, idle_pollers
    variance = h**2 / 12 + p**2 * k / ((k + 1) ** 2 * (k + 2))
    if watcher_interval is not None:
        variance += (watcher_interval + latency) ** 2 / 12
    return variance
