"""The memory backend's compact row forms give back exactly what was stored."""

import pytest

from sim.db.base import JobState
from sim.db.memory.compact import (
    Ledger,
    marker_hash,
    marker_time,
    pack_marker,
    pack_payload,
    unpack_payload,
)
from sim.db.memory.rows import JobRow, SettledJobRow, settle
from sim.payload import payload_hash, payload_json


@pytest.mark.parametrize(
    "digest",
    [
        payload_hash(payload_json("evt-1", 100)),
        "0123456789abcdef",
        "0123456789ABCDEF",  # upper case: kept as text, not lowered
        "0123456789abcdeg",
        "h1",
        "",
        "ümlaut-hash",
        "0123456789abcdef0",
    ],
)
@pytest.mark.parametrize("at", [0, 1, 1_767_225_600_000_000, -5, 2**63 - 1])
def test_a_marker_gives_back_its_hash_and_time(digest, at):
    marker = pack_marker(digest, at)
    assert (marker_hash(marker), marker_time(marker)) == (digest, at)
    assert type(marker_hash(marker)) is str


def test_the_producers_hash_takes_eight_bytes_and_each_marker_is_its_own_object():
    digest = payload_hash(payload_json("evt-1", 100))
    assert len(pack_marker(digest, 7)) == 8 + 1 + 8
    assert pack_marker(digest, 7) is not pack_marker(digest, 7)  # purges compare by identity


@pytest.mark.parametrize(
    ("event_id", "payload", "packed"),
    [
        ("evt-1", payload_json("evt-1", 100), 100),
        ("evt-123456", payload_json("evt-123456", 99_999), 99_999),
        ("e", payload_json("e", 0), 0),
        ("evt-1", payload_json("evt-2", 100), None),  # another event's payload
        ("evt-1", payload_json("evt-1", 100).replace("100", "0100"), None),  # not canonical
        ("evt-1", payload_json("evt-1", 100).replace("EUR", "USD"), None),
        ("evt-1", payload_json("evt-1", -5), -5),
        ("evt-1", '{"event_id":"evt-1","amount_cents": 5,"currency":"EUR"}', None),
        ("evt-1", "", None),
        ("evt-1", "not json", None),
        ("", "{}", None),
    ],
)
def test_a_payload_is_kept_as_its_amount_only_when_it_is_the_producers_own(
    event_id, payload, packed
):
    stored = pack_payload(event_id, payload)
    assert stored == (payload if packed is None else packed)
    assert unpack_payload(event_id, stored) == payload


def test_the_ledger_columns_give_back_their_rows_in_commit_order():
    rows = [
        (2, 1, "evt-1", 100, "w1", 1, 5_000_000),
        (1, 2, "evt-2", 2**62, "w2", 3, -1),
    ]
    ledger = Ledger()
    ledger.extend(rows[:1])
    ledger.extend(rows[1:])
    assert list(ledger) == rows and len(ledger) == 2
    types = [tuple(type(v) for v in row) for row in ledger]
    assert types == [(int, int, str, int, str, int, int)] * 2


def _completed_row(**times):
    row = JobRow(7, "evt-7", payload_json("evt-7", 700), 1_000_000)
    row.status, row.lease_owner, row.attempts = JobState.COMPLETED, "w1", 2
    for name, value in times.items():
        setattr(row, name, value)
    return row


def _fields(row):
    return [getattr(row, name) for name in JobRow.__slots__] + [row.payload]


@pytest.mark.parametrize(
    "times",
    [
        {"heartbeat_at": 2_000_000, "lease_until": 32_000_000, "completed_at": 3_000_000},
        {"heartbeat_at": None, "lease_until": None, "completed_at": None},
        {"heartbeat_at": 0, "lease_until": 2**62 - 1, "completed_at": 5},
    ],
)
def test_a_settled_row_reads_as_it_was_and_a_write_unsettles_it(times):
    plain, settled = _completed_row(**times), _completed_row(**times)
    settle(settled)
    assert type(settled) is SettledJobRow
    assert _fields(settled) == _fields(plain)
    assert _fields(settled.copy()) == _fields(plain) and type(settled.copy()) is JobRow
    settled.lease_until = plain.lease_until = 99
    assert type(settled) is JobRow and _fields(settled) == _fields(plain)


@pytest.mark.parametrize(
    ("status", "times"),
    [
        (JobState.PROCESSING, {}),
        (JobState.PENDING, {}),
        (JobState.COMPLETED, {"completed_at": -1}),
        (JobState.COMPLETED, {"lease_until": 2**62}),
        (JobState.COMPLETED, {"heartbeat_at": 2.5}),
    ],
)
def test_only_a_final_row_whose_times_fit_is_settled(status, times):
    row = _completed_row(**times)
    row.status = status
    before = _fields(row)
    settle(row)
    assert type(row) is JobRow and _fields(row) == before
