"""A payment job's payload as the producer stores it, and the hash a dedup marker keeps of it: one
format for the model, the probes of a queue's SQL and the teaching notebooks."""

from __future__ import annotations

import hashlib


def payload_hash(payload: str) -> str:
    """The hash stored with a dedup marker: a redelivery with another payload has another hash."""
    return hashlib.sha256(payload.encode()).hexdigest()[:16]


def payload_json(event_id: str, amount_cents: int) -> str:
    """The job's payload as the producer stores it (its hash is what dedup compares)."""
    return f'{{"event_id":"{event_id}","amount_cents":{amount_cents},"currency":"EUR"}}'
