"""The live fault schedule: the model's fault times (same seeded streams) as timed signal actions.

crash -> SIGKILL of the worker process (then a new process after the restart delay); pause ->
SIGSTOP at its start and SIGCONT at its end; partition -> the end written into the worker's slot
(its connections drop and its statements fail, or hang, until then). Heartbeat loss and delay
are drawn by the worker itself.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field

from sim.model.faults import holder_crash_times, worker_crash_times, worker_outages
from sim.support.rng import Streams


@dataclass(order=True)
class Action:
    t: float
    seq: int
    kind: str = field(
        compare=False
    )  # crash | crash_holder | crash_job | pause | unpause | partition | heal | restart
    worker: int | None = field(default=None, compare=False)
    job: int | None = field(default=None, compare=False)
    until: float | None = field(default=None, compare=False)


class FaultSchedule:
    """A time-ordered queue of fault actions; the runner pops them as the clock reaches them."""

    def __init__(self, scenario):
        faults, workers, horizon = scenario.faults, scenario.policy.workers, scenario.horizon
        streams = Streams(scenario.seed)
        self._heap: list[Action] = []
        self._seq = 0
        for i in range(workers):
            for t in worker_crash_times(faults, i, streams, horizon):
                self.push(t, "crash", worker=i)
            pauses, partitions = worker_outages(faults, i, streams, horizon)
            for start, end in pauses.intervals:
                self.push(start, "pause", worker=i, until=end)
                self.push(end, "unpause", worker=i)
            for start, end in partitions.intervals:
                self.push(start, "partition", worker=i, until=end)
                self.push(end, "heal", worker=i)
        for t in holder_crash_times(faults, workers, streams, horizon):
            self.push(t, "crash_holder")
        for crash in faults.crashes:
            if crash.job is not None:
                self.push(crash.at, "crash_job", job=crash.job)
        self.pick = streams.generator("crashes/holder-pick")
        self.restart_delay = [
            faults.restart_delay.sampler(streams.generator(f"worker/{i}/restart"))
            for i in range(workers)
        ]

    def push(self, t: float, kind: str, **fields) -> None:
        self._seq += 1
        heapq.heappush(self._heap, Action(t, self._seq, kind, **fields))

    def next_time(self) -> float:
        return self._heap[0].t if self._heap else float("inf")

    def pop(self) -> Action:
        return heapq.heappop(self._heap)
