"""Each `advise --as QUEUE` translation's printed worst wait is what a simulation of the queue
with the advised settings shows (issue 31): the queue's preset, the translation's settings in
Lease Lab's words over it (QueueAdvice.overrides), and a crash workload that reaches the worst
case: short jobs (1% of the worst wait, at most 1 s) arriving at 0.5 a second, each likely to
have its worker crashed under it within a job's length of its claim (crash_target = holder), so
a crash comes right after the last renewal with the sweep at every phase. The longest wait from
a crash until the job is found (requeued, failed, or claimable again:
sim.comparisons.peers.detection_waits) must be within 10% under the printed figure and never over it
(by more than a statement's latency, or a poll where a worker must pick the rescue up:
procrastinate's rescue is a job).

The pairs are the translations of the default advice (TTL 3 s, heartbeat 1 s, watcher 0.5 s),
each version they give apart, and the no-heartbeat advice's where its lines differ.
"""

from __future__ import annotations

import numpy as np
import pytest

import sim
from sim.advice.queue_terms import QUEUES, in_queue_terms
from sim.comparisons.peers import detection_waits
from sim.scenario.settings import preset

NO_HEARTBEAT = {
    "ttl": [60, 120, 180, 300],
    "heartbeat_interval": [None],
    "watcher_interval": [5, 30],
}
JOBS, RATE, WORKERS = 150, 0.5, 6
LATENCY = 0.002


@pytest.fixture
def advices(sample_advice, no_heartbeat_advice):
    return {"default": sample_advice, "no heartbeat": no_heartbeat_advice}


CASES = [("default", queue) for queue in QUEUES] + [
    ("no heartbeat", queue) for queue in ("temporal", "sqs", "pg-boss")
]


def crash_probe(queue_preset: str, overrides: dict, worst: float):
    """The queue's preset with the advised settings, under the crash workload."""
    job = min(1.0, worst / 100)
    return preset(queue_preset).with_overrides(
        {
            **overrides,
            "name": f"{queue_preset}-as-advised",
            "workload.jobs": JOBS,
            "workload.arrival": "poisson",
            "workload.rate": RATE,
            "workload.processing": job,
            "workload.psp_call": 0.0,
            "workload.statement_latency": LATENCY,
            "policy.workers": WORKERS,
            # one crash per job length, pool-wide, each of a worker holding a job
            "faults.crash_rate": 3600.0 / job / WORKERS,
            "faults.crash_target": "holder",
            "faults.restart_delay": 1.0,
            "horizon": JOBS / RATE + 2 * worst + 60,
            "record_heartbeats": False,
        }
    )


@pytest.mark.parametrize(("which", "queue"), CASES)
def test_the_printed_worst_wait_is_what_the_simulation_shows(advices, which, queue):
    q = in_queue_terms(advices[which], queue)
    versions = [(q.version, q.overrides, q.worst_wait)] + [
        (o.label, o.overrides, o.worst_wait) for o in q.others if o.overrides
    ]
    for version, overrides, worst in versions:
        scenario = crash_probe(q.preset, overrides, worst)
        waits = detection_waits(sim.run(scenario, seed=1), claimable=True)
        found = waits[np.isfinite(waits)]
        assert len(found) >= 50, (version, len(found))  # enough crashes to reach the worst case
        slack = 10 * LATENCY + (
            scenario.policy.poll_interval if scenario.policy.rescue == "job" else 0
        )
        assert 0.9 * worst <= found.max() <= worst + slack, (version, worst, found.max())
