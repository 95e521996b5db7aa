"""Simulated seconds as PostgreSQL's timestamptz: whole microseconds from EPOCH, the one
quantisation the protocol's lease arithmetic and both backends share."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

# Simulated second 0 as a timestamptz; every time parameter is EPOCH + simulated seconds.
EPOCH = datetime(2026, 1, 1, tzinfo=UTC)
MICROS = 1_000_000


def to_micros(seconds: float) -> int:
    """Quantise simulated seconds to whole microseconds, timestamptz's resolution."""
    return round(seconds * MICROS)


def to_timestamp(seconds: float) -> datetime:
    return EPOCH + timedelta(microseconds=to_micros(seconds))


def from_timestamp(ts: datetime) -> float:
    return (ts - EPOCH) // timedelta(microseconds=1) / MICROS
