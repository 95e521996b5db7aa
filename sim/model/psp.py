"""The simulated payment service provider: honours idempotency keys."""

from __future__ import annotations


class Psp:
    """A card charge is an external effect: not rolled back with the database transaction."""

    def __init__(self) -> None:
        self.seen_keys: set[str] = set()

    def charge(self, key: str | None) -> str:
        """Charge now: "new", or "replay" (the first result) for a key already seen."""
        if key is None:
            return "new"
        if key in self.seen_keys:
            return "replay"
        self.seen_keys.add(key)
        return "new"
