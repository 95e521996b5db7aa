"""The stuck watcher: periodically makes Processing jobs with an expired lease claimable again."""

from __future__ import annotations

from sim.model.session import DbSession


def watcher(world):
    """Process: tick every watcher_interval from a random phase; requeue (or kill) expired leases."""
    policy = world.scenario.policy
    env, log = world.env, world.log
    latency = world.scenario.workload.statement_latency.sampler(world.streams.generator("latency/watcher"))
    db = DbSession(world, "watcher", latency)
    max_attempts = policy.max_attempts if policy.watcher_action == "requeue" else 0
    if policy.random_phase:
        yield env.timeout(float(world.streams.generator("watcher/phase").uniform(0, policy.watcher_interval)))
    while True:
        rows = yield from db.run("requeue_expired", {"max_attempts": max_attempts, "limit": policy.watcher_batch})
        now = env.now
        log.add(now, "watcher_tick", "watcher", None, None, len(rows))
        for job, status, _owner, attempts in rows:
            log.add(now, "requeue", "watcher", job, attempts, status)
        yield env.timeout(policy.watcher_interval)
