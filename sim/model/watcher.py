"""The stuck watcher: periodically makes Processing jobs with an expired lease claimable again.

By default one statement finds and requeues them, re-checking each row as it updates it. With a
watcher_gap it reads the stuck jobs first and updates each by id later, whatever the job became
meanwhile: River's JobRescuer before PR #1373 (issue #1302), which could requeue a completed job.
"""

from __future__ import annotations

from sim.db.base import to_micros
from sim.model.session import DbSession


def watcher(world):
    """Process: tick every watcher_interval from a random phase; requeue (or kill) expired leases."""
    policy = world.scenario.policy
    env, log = world.env, world.log
    latency = world.scenario.workload.statement_latency.sampler(
        world.streams.generator("latency/watcher")
    )
    db = DbSession(world, "watcher", latency)
    max_attempts = policy.max_attempts if policy.watcher_action == "requeue" else 0
    backoff = to_micros(policy.retry_backoff)  # microseconds x attempts^4
    gap = policy.watcher_gap
    if policy.random_phase:
        yield env.timeout(
            float(world.streams.generator("watcher/phase").uniform(0, policy.watcher_interval))
        )
    while True:
        if gap:
            stuck = yield from db.run("select_stuck_jobs", {"stuck_after": policy.lease_ttl})
            yield env.timeout(gap)
            rows = []
            for job, *_ in stuck[: policy.watcher_batch]:
                rows += yield from db.run(
                    "rescue_job",
                    {
                        "id": job,
                        "max_attempts": max_attempts,
                        "retry_backoff": backoff,
                        "stuck_after": policy.lease_ttl,
                    },
                    job=job,
                )
        else:
            rows = yield from db.run(
                "requeue_expired",
                {
                    "max_attempts": max_attempts,
                    "limit": policy.watcher_batch,
                    "retry_backoff": backoff,
                    "stuck_after": policy.lease_ttl,
                },
            )
        now = env.now
        log.add(now, "watcher_tick", "watcher", None, None, len(rows))
        for job, status, _owner, attempts in rows:
            log.add(now, "requeue", "watcher", job, attempts, status)
        yield env.timeout(policy.watcher_interval)
