"""Event records that survive SIGKILL: each process appends JSON lines to a file of its own.

Every record is one os.write() on a descriptor opened with O_APPEND: once the call returns the
line is in the kernel's page cache, so killing the process a microsecond later loses nothing.
Besides the model's event kinds, a process records each statement it ran (`stmt`: name and wall
latency) so that the runner can count statements and see the latency tail.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

STATEMENT = "stmt"


class Recorder:
    """Append-only record file of one process incarnation; `add` takes the event log's arguments
    (sim.protocol.Recorder: t first, as EventLog.add)."""

    def __init__(self, path: str | Path, clock):
        self.path = Path(path)
        self.clock = clock
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self.muted = False  # a process shutting down: its other threads' records are not kept

    def add(
        self,
        t: float,
        kind: str,
        worker: str | None = None,
        job: int | None = None,
        attempt: int | None = None,
        detail: object = None,
    ) -> None:
        if self.muted:
            return
        os.write(self._fd, (json.dumps([t, kind, worker, job, attempt, detail]) + "\n").encode())

    def statement(self, name: str, seconds: float) -> None:
        os.write(
            self._fd, (json.dumps([self.clock.now(), STATEMENT, name, seconds]) + "\n").encode()
        )

    def close(self) -> None:
        os.close(self._fd)


def read_records(folder: str | Path) -> tuple[list[list], list[tuple[float, str, float]]]:
    """All event records of a run folder in time order, and its statements as (scenario time,
    statement, wall latency); a statement sent before the start has no scenario time yet (its
    process's clock counts from the machine's boot then).

    A line cut short by a kill in the middle of a write is skipped (os.write of a short line is
    atomic in practice, so this does not happen, but a torn line must not break the run)."""
    events, statements = [], []
    for path in sorted(Path(folder).glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue
            if record[1] == STATEMENT:
                statements.append((float(record[0]), record[2], float(record[3])))
            else:
                events.append(record)
    events.sort(key=lambda r: r[0])  # stable: records of one process keep their order on ties
    return events, statements


def event_log(records: list[list]):
    """The records as the EventLog type a simulated run has (imported here: children never need
    it)."""
    from sim.model.events import EventLog

    log = EventLog()
    for t, kind, worker, job, attempt, detail in records:
        log.add(float(t), kind, worker, job, attempt, detail)
    return log
