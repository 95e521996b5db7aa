"""The simulated payment service provider: records every charge and honours idempotency keys."""

from __future__ import annotations


class Psp:
    """A card charge is an external effect: not rolled back with the database transaction."""

    def __init__(self, env, log: list):
        self.env = env
        self.log = log
        self.seen_keys: set[str] = set()

    def charge(self, worker: str, job: int, attempt: int, key: str | None) -> str:
        """Charge now; with a key already seen, replay the first result instead of charging twice."""
        outcome = "replay" if key is not None and key in self.seen_keys else "new"
        if key is not None:
            self.seen_keys.add(key)
        self.log.add(self.env.now, "psp_charge", worker, job, attempt, outcome)
        return outcome
