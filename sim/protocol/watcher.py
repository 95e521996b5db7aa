"""The stuck watcher's tick: what it sends to requeue (or kill) Processing jobs whose lease expired,
and to prune the rows of processes that stopped beating (process liveness)."""

from __future__ import annotations

from typing import Any

from sim.protocol.failures import DbUnavailable
from sim.protocol.steps import Record, Rows, Statement, Steps, Wait
from sim.protocol.timestamps import to_micros

MAX_STALLS = 1_000_000  # bound as max_stalls when there is no stall budget: never reached


class WatcherProtocol:
    """The stuck watcher's tick: requeue (or kill) Processing jobs whose lease expired.

    By default one statement finds and requeues them, re-checking each row as it updates it. With
    a watcher_gap it reads the stuck jobs first and updates each by id later, whatever the job
    became meanwhile: River's JobRescuer before PR #1373 (issue #1302)."""

    name = "watcher"

    def __init__(self, policy: Any):
        max_attempts = policy.max_attempts if policy.watcher_action == "requeue" else 0
        backoff = to_micros(policy.retry_backoff)  # microseconds x attempts^4
        self.gap = policy.watcher_gap
        self.batch = policy.watcher_batch
        self._stuck = {"stuck_after": policy.lease_ttl}  # the stuck age, for a rescue by age
        self._rescue = {"max_attempts": max_attempts, "retry_backoff": backoff, **self._stuck}
        params = {"max_attempts": max_attempts, "limit": policy.watcher_batch}
        self._prune = None
        if policy.process_heartbeat_interval:  # process liveness: prune, and move the orphans
            stalls = MAX_STALLS if policy.max_stalls is None else policy.max_stalls
            prune = {
                "stale_after": to_micros(policy.process_stale_after),
                "dead": policy.prune_action == "dead",
                "max_attempts": policy.claim_cap,
                "max_stalls": stalls,
                "limit": policy.watcher_batch,
                "retry_backoff": backoff,
            }
            self._prune = Statement("prune_processes", prune)
        self.sweeps_leases = policy.sweeps_leases
        if policy.stall_check == "two_phase":  # the stall budget, if any, apart from the attempts
            stalls = MAX_STALLS if policy.max_stalls is None else policy.max_stalls
            params = {
                **params,
                "max_stalls": stalls,
                "max_attempts": max_attempts and policy.claim_cap,
            }
            self._requeue = Statement("reclaim_stalled", {**params, "retry_backoff": backoff})
        else:
            self._requeue = Statement(
                "requeue_expired", {**params, "retry_backoff": backoff, **self._stuck}
            )

    def tick(self) -> Steps[None]:
        """One tick; the jobs it moved are recorded (a lost connection moves none)."""
        rows: Rows = []
        try:
            if not self.sweeps_leases:
                pass
            elif self.gap:
                stuck = yield Statement("select_stuck_jobs", dict(self._stuck))
                yield Wait(self.gap)
                for job, *_ in stuck[: self.batch]:
                    params = {"id": job, **self._rescue}
                    rows += yield Statement("rescue_job", params, job)
            else:
                rows = yield self._requeue
            if self._prune is not None:
                rows = rows + (yield self._prune)
        except DbUnavailable:
            pass
        yield Record("watcher_tick", "watcher", None, None, len(rows))
        for job, status, _owner, attempts in rows:
            yield Record("requeue", "watcher", job, attempts, status)
