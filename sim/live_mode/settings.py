"""The scenarios live mode is checked at.

hand_check: issue 18's hand-built check, the settings a live run is compared at by default. 4
workers, the seed's claim (it takes expired leases) plus a watcher every 1 s, TTL 2 s, heartbeat
0.5 s, poll 0.2 s, exponential jobs of mean 1 s, a job holder killed about every 2 s (crash_target
"holder" at 450 per worker-hour x 4 workers = 1800 per hour), back after 1 s; fenced completion.

read_then_write_race: the read-then-write-race preset as examples/queues/read-then-write runs it
(--sql), for a comparison whose double claims come from the queue's own SQL.
"""

from __future__ import annotations

from sim.scenario.settings import Scenario, preset

HAND_CHECK = {
    "name": "live-check",
    "description": "issue 18's hand-built live check: kill a job holder about every 2 s",
    "workload.jobs": 5000,
    "workload.arrival": "batch",
    "workload.processing": {"kind": "exponential", "mean": 1.0},
    "workload.psp_call": 0.0,
    "policy.workers": 4,
    "policy.poll_interval": 0.2,
    "policy.claim": "conditional_update",
    "policy.claim_takes_expired": True,
    "policy.lease_ttl": 2.0,
    "policy.heartbeat_interval": 0.5,
    "policy.watcher": True,
    "policy.watcher_interval": 1.0,
    "policy.fencing": True,
    "faults.crash_target": "holder",
    "faults.crash_rate": 450.0,
    "faults.restart_delay": 1.0,
    "horizon": 100.0,
}


def hand_check(**overrides) -> Scenario:
    """The issue's settings on the crash-recovery preset, with dotted overrides on top."""
    return preset("crash-recovery").with_overrides({**HAND_CHECK, **overrides})


READ_THEN_WRITE_QUEUE = "read-then-write"  # examples/queues/<this>
READ_THEN_WRITE_RACE = {
    # the queue's claim is claim_conditional after the SELECT (its queries.sql says so)
    "policy.claim": "conditional_update",
    # 20 ms of application time between a worker's read and its claim: two workers' reads of one
    # Pending row overlap often enough to count double claims in a run of seconds
    "policy.select_to_update_gap": 0.02,
}


def read_then_write_race(**overrides) -> Scenario:
    """The read-then-write-race preset with READ_THEN_WRITE_RACE (and dotted overrides on top)."""
    return preset("read-then-write-race").with_overrides({**READ_THEN_WRITE_RACE, **overrides})
