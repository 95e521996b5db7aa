"""The live stuck watcher: every watcher_interval (from a random phase) requeues expired leases."""

from __future__ import annotations

from sim.db.base import to_micros
from sim.live.connection import DbUnavailable, LiveConnection
from sim.rng import Streams


class LiveWatcher:
    def __init__(self, scenario, *, dsn, schema, queries, clock, recorder):
        self.policy = scenario.policy
        self.clock, self.recorder = clock, recorder
        self.db = LiveConnection(dsn, schema, "watcher", queries, clock, recorder)
        self.phase = (
            float(
                Streams(scenario.seed)
                .generator("watcher/phase")
                .uniform(0, self.policy.watcher_interval)
            )
            if self.policy.random_phase
            else 0.0
        )

    def prepare(self) -> None:
        self.db.open()

    def run(self, _incarnation: int = 0, _start_at: float = 0.0) -> None:
        policy = self.policy
        max_attempts = policy.max_attempts if policy.watcher_action == "requeue" else 0
        backoff = to_micros(
            policy.retry_backoff
        )  # microseconds x attempts^4, as the model's watcher
        self.clock.sleep(self.phase)
        while True:
            try:
                rows = self.db.run(
                    "requeue_expired",
                    {
                        "max_attempts": max_attempts,
                        "limit": policy.watcher_batch,
                        "retry_backoff": backoff,
                        "stuck_after": policy.lease_ttl,
                    },
                )
            except DbUnavailable:
                rows = []
            now = self.clock.now()
            self.recorder.add("watcher_tick", "watcher", None, None, len(rows), t=now)
            for job, status, _owner, attempts in rows:
                self.recorder.add("requeue", "watcher", job, attempts, status, t=now)
            self.clock.sleep(policy.watcher_interval)
