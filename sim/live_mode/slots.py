"""What the runner must know of each worker between processes: the job it holds, in shared memory.

A file mapped by every process (mmap): per worker, the job it holds (0: none), the attempt and its
lease_until, written only by that worker (after a claim commits, at each renewal, and cleared once
the job is done); then per worker the end of a partition in progress, written only by the runner.
The runner reads the first to kill a holder (crash_target "holder") and to log what a killed worker
held; the worker reads the second before each statement. A restarted worker reuses its record.
"""

from __future__ import annotations

import mmap
import os
import struct
import threading
from pathlib import Path

_HOLD = struct.Struct("<qqd")  # job, attempt, lease_until
_END = struct.Struct("<d")  # partitioned until


class Slots:
    def __init__(self, path: str | Path, workers: int, *, create: bool = False):
        self.path = Path(path)
        self.workers = workers
        size = (_HOLD.size + _END.size) * workers
        if create:
            self.path.write_bytes(bytes(size))
        fd = os.open(self.path, os.O_RDWR)
        try:
            self._map = mmap.mmap(fd, size)
        finally:
            os.close(fd)
        self._lock = (
            threading.Lock()
        )  # a worker's two threads (claims and heartbeats) write its record

    def hold(self, i: int, job: int, attempt: int, until: float) -> None:
        with self._lock:
            _HOLD.pack_into(self._map, i * _HOLD.size, job, attempt, until)

    def renew(self, i: int, job: int, until: float) -> None:
        with self._lock:
            held, attempt, _ = _HOLD.unpack_from(self._map, i * _HOLD.size)
            if held == job:
                _HOLD.pack_into(self._map, i * _HOLD.size, job, attempt, until)

    def release(self, i: int) -> None:
        with self._lock:
            _HOLD.pack_into(self._map, i * _HOLD.size, 0, 0, 0.0)

    def held(self, i: int) -> tuple[int, int, float] | None:
        """(job, attempt, lease_until) worker i holds, or None."""
        job, attempt, until = _HOLD.unpack_from(self._map, i * _HOLD.size)
        return (job, attempt, until) if job else None

    def partition(self, i: int, until: float) -> None:
        _END.pack_into(self._map, (self.workers * _HOLD.size) + i * _END.size, until)

    def partitioned_until(self, i: int) -> float:
        return _END.unpack_from(self._map, (self.workers * _HOLD.size) + i * _END.size)[0]

    def close(self) -> None:
        self._map.close()
