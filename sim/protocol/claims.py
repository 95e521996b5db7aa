"""How a worker claims a job: one poll of its loop, by the policy's claim strategy (SKIP LOCKED in
one statement, SELECT ... FOR UPDATE then the write, or read candidates then claim each by id,
conditionally or not), or a prefetching worker's batch."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

from sim.protocol.failures import DbUnavailable
from sim.protocol.lease import Lease
from sim.protocol.steps import BEGIN, COMMIT, Record, Rows, Statement, Steps, Wait, Work


class Claims:
    """A worker's claim path: the statements of its strategy, with their parameters, built once
    (the driver binds now into them). `lease` makes the worker's Lease (job, attempt, until)."""

    def __init__(self, name: str, policy: Any, lease: Callable[[int, int, float], Lease] = Lease):
        self.name = name
        self.lease_type = lease
        self.timeout = policy.execution_timeout  # 0: none
        ttl = policy.lease_ttl
        claim_ttl = min(ttl, self.timeout) if self.timeout else ttl
        cap = policy.claim_cap  # max_attempts, plus the stall budget if there is one
        self.max_attempts = cap
        self.gap = policy.select_to_update_gap
        take = policy.claim_takes_expired
        self._skip_locked = Statement(
            "claim_skip_locked",
            {"owner": name, "take_expired": take, "max_attempts": cap},
            None,
            claim_ttl,
        )
        self._lock_next = Statement(
            "lock_next_candidate", {"take_expired": take, "max_attempts": cap}
        )
        self._candidates = Statement(
            "select_candidates",
            {"take_expired": take, "max_attempts": cap, "limit": policy.candidates},
        )
        self._by_id = (
            "claim_conditional" if policy.claim == "conditional_update" else "claim_unconditional"
        )
        self._claim_ttl = claim_ttl
        self._poll_wait = Wait(policy.poll_interval)
        self._idle = Record("idle", name, None, None, None)
        self._claim_failed = Record("db_error", name, None, None, "claim")
        self._batch = Statement(
            "claim_batch",
            {"owner": name, "take_expired": take, "max_attempts": cap, "limit": policy.prefetch},
            None,
            claim_ttl,
        )
        self.claim: Callable[[], Steps[Lease | None]] = {  # by id: conditional, read_then_write
            "skip_locked": self.claim_skip_locked,
            "select_for_update": self.claim_select_for_update,
        }.get(policy.claim, self.claim_read_then_write)

    def poll(self) -> Steps[Lease | None]:
        """One turn of the worker's loop: the Lease it claimed (recorded), or None once it has
        recorded why not (nothing to claim, or no database) and waited a poll interval."""
        return self._polling(until_claimed=False)

    def poll_until_claimed(self) -> Steps[Lease]:
        """Poll until a claim succeeds: a worker's plain loop (one claim per poll, nothing else to
        run between polls) as one sequence, so that a run of idle polls is one driver's play."""
        return cast("Steps[Lease]", self._polling(until_claimed=True))  # a string: no alias built

    def _polling(self, until_claimed: bool) -> Steps[Lease | None]:
        """The body of poll and poll_until_claimed: polls until a claim, or just one."""
        claim, wait = self.claim, self._poll_wait
        while True:
            try:
                lease = yield from claim()
            except DbUnavailable:
                yield self._claim_failed
                yield wait
                if until_claimed:
                    continue
                return None
            if lease is not None:
                yield Record("claim", self.name, lease.job, lease.attempt, lease.until)
                return lease
            yield self._idle
            yield wait
            if not until_claimed:
                return None

    def poll_batch(self) -> Steps[list[Lease]]:
        """A prefetching worker's poll (policy.prefetch > 1): the leases of up to `prefetch` jobs
        claimed at once, each recorded, oldest first; or [] once it has recorded why not and waited
        a poll interval. Every lease starts now, the buffered ones too."""
        step = self._batch
        try:
            rows = yield step
        except DbUnavailable:
            yield self._claim_failed
            yield self._poll_wait
            return []
        if not rows:
            yield self._idle
            yield self._poll_wait
            return []
        leases = [self._claimed([row], step.params) for row in rows]
        for lease in leases:
            assert lease is not None
            yield Record("claim", self.name, lease.job, lease.attempt, lease.until)
        return leases  # type: ignore[return-value]

    def claim_skip_locked(self) -> Steps[Lease | None]:
        """One statement takes the next claimable job, skipping rows other claims hold locked."""
        step = self._skip_locked
        return self._claimed((yield step), step.params)

    def claim_select_for_update(self) -> Steps[Lease | None]:
        """Lock the next candidate (FOR UPDATE), then write the lease, in one transaction."""
        yield BEGIN
        rows = yield self._lock_next
        if not rows:
            yield COMMIT
            return None
        job = rows[0][0]
        if self.gap:
            yield Work(self.gap)
        params = {"id": job, "owner": self.name, "max_attempts": self.max_attempts}
        rows = yield Statement("claim_unconditional", params, job, self._claim_ttl)
        yield COMMIT
        return self._claimed(rows, params)

    def claim_read_then_write(self) -> Steps[Lease | None]:
        """Read candidates, then claim each by id: conditionally (the seed's UPDATE ... WHERE,
        re-checked on the row) or unconditionally (read-then-write: a lost update)."""
        query, name = self._by_id, self.name
        while True:
            candidates = yield self._candidates
            if not candidates:
                return None
            if self.gap:
                yield Work(self.gap)
            for row in candidates:
                job = row[0]
                params = {"id": job, "owner": name, "max_attempts": self.max_attempts}
                rows = yield Statement(query, params, job, self._claim_ttl)
                if rows:
                    return self._claimed(rows, params)
                yield Record("claim_lost", name, job, None, None)

    def _claimed(self, rows: Rows, params: dict[str, Any]) -> Lease | None:
        """The lease a claim statement returned; its lease_until is the value the statement
        wrote."""
        if not rows:
            return None
        job, attempt = rows[0]
        lease = self.lease_type(job, attempt, params["lease_until"])
        if self.timeout:
            lease.cap = params["now"] + self.timeout
        return lease
