"""Compact forms of the rows a run keeps to its end, one per job (a 1M-job run holds a million of
each): the ledger as typed columns, a dedup marker as one packed bytes value, and a job's payload
as its amount when it is the producer's own JSON. Each form gives back exactly what was stored."""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Iterator

from sim.payload import payload_json

# A ledger row (entry_id, job_id, event_id, amount_cents, worker, attempt, applied_at); applied_at
# in microseconds.
LedgerEntry = tuple[int, int, str, int, str, int, int]

# A processed_events row (payload_hash, processed_at in microseconds) packed by pack_marker.
Marker = bytes


class Ledger:
    """The committed ledger rows as columns: bigint ones in int64 arrays, text ones as references
    to the strings the callers passed (event ids and worker names are shared, not copied)."""

    __slots__ = ("entry_id", "job_id", "event_id", "amount_cents", "worker", "attempt", "at")

    def __init__(self) -> None:
        self.entry_id, self.job_id, self.amount_cents = array("q"), array("q"), array("q")
        self.attempt, self.at = array("q"), array("q")
        self.event_id: list[str] = []
        self.worker: list[str] = []

    def extend(self, entries: Iterable[LedgerEntry]) -> None:
        for entry_id, job_id, event_id, amount_cents, worker, attempt, applied_at in entries:
            self.entry_id.append(entry_id)
            self.job_id.append(job_id)
            self.event_id.append(event_id)
            self.amount_cents.append(amount_cents)
            self.worker.append(worker)
            self.attempt.append(attempt)
            self.at.append(applied_at)

    def __len__(self) -> int:
        return len(self.entry_id)

    def __iter__(self) -> Iterator[LedgerEntry]:
        columns = self.entry_id, self.job_id, self.event_id, self.amount_cents, self.worker
        return zip(*columns, self.attempt, self.at, strict=True)


_HEX, _TEXT = b"\x00", b"\x01"  # how a marker's payload_hash is kept: 8 raw bytes, or UTF-8 text


def pack_marker(payload_hash: str, processed_at: int) -> Marker:
    """processed_at (8 bytes), then the hash: a 16-digit lowercase hex one (payload_hash's form)
    as its 8 bytes, any other text as UTF-8. Each call makes a new object (purges compare by
    identity)."""
    at = processed_at.to_bytes(8, "little", signed=True)
    if len(payload_hash) == 16:
        try:
            raw = bytes.fromhex(payload_hash)
        except ValueError:
            pass
        else:
            if raw.hex() == payload_hash:
                return at + _HEX + raw
    return at + _TEXT + payload_hash.encode()


def marker_hash(marker: Marker) -> str:
    return marker[9:].hex() if marker[8:9] == _HEX else marker[9:].decode()


def marker_time(marker: Marker) -> int:
    """processed_at in microseconds."""
    return int.from_bytes(marker[:8], "little", signed=True)


# '{"event_id":"' and '","amount_cents":' around the event id; ',"currency":"EUR"}' after the amount
_BEFORE_AMOUNT, _AFTER_AMOUNT = len(payload_json("", 0)) - 19, 18


def pack_payload(event_id: str, payload: str) -> str | int:
    """The amount when `payload` is payload_json(event_id, amount) to the character (rebuilt by
    unpack_payload); else the payload itself."""
    digits = payload[_BEFORE_AMOUNT + len(event_id) : -_AFTER_AMOUNT]
    try:
        amount = int(digits)
    except ValueError:
        return payload
    return amount if payload_json(event_id, amount) == payload else payload


def unpack_payload(event_id: str, packed: str | int) -> str:
    return packed if isinstance(packed, str) else payload_json(event_id, packed)
