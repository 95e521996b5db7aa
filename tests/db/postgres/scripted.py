"""Small scenarios with constant times, so that every instant in a log is predictable: the model's
own (tests/model/scripts.py), with the records the PostgreSQL tests' timelines leave out."""

from __future__ import annotations

from tests.model.scripts import LATENCY, scripted
from tests.model.scripts import timeline as _timeline

__all__ = ["LATENCY", "scripted", "timeline"]


def timeline(
    run, *, skip=("idle", "watcher_tick", "enqueue", "heartbeat", "psp_charge")
) -> list[tuple]:
    return _timeline(run, skip=skip)
