"""The worker's own view of the lease it holds."""

from __future__ import annotations

from sim.protocol.steps import Statement


class Lease:
    """The worker's own view of the lease it holds (the heartbeat renews `until`)."""

    __slots__ = ("job", "attempt", "until", "lost", "done", "renewal", "cap", "past_deadline")

    def __init__(self, job: int, attempt: int, until: float):
        self.job = job
        self.attempt = attempt
        self.until = until
        self.lost = False  # a heartbeat found it gone (or could not renew it in time)
        self.done = False  # the job is finished or given up: no more heartbeats
        self.past_deadline = False  # the worker-side deadline passed with the handler running
        self.renewal: Statement | None = None  # the heartbeat's step, built at the first beat
        self.cap: float | None = None  # claim + execution_timeout: no renewal goes past it

    def finish(self) -> None:
        """No more heartbeats: the job is done, or its completion transaction holds the row."""
        self.done = True

    def extend(self, until: float) -> None:
        """A heartbeat renewed the lease to `until`."""
        self.until = until
