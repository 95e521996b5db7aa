"""The one clock of a live run: CLOCK_MONOTONIC seconds since a common start, divided by the time
scale.

Why this clock. The named statements bind the clock as %(now)s (so PostgreSQL's now() is not used),
and every process must bind the same one or leases would stretch and shrink between workers.
CLOCK_MONOTONIC is one system-wide clock on Linux, shared by every process of this machine, and
never steps when NTP corrects the wall time; the runner picks the start instant t0 once and hands
it to every process. Scenario time = (monotonic() - t0) / scale, so --time-scale 0.1 plays a
1-hour scenario in 6 minutes with the scenario's own TTL, heartbeat and watcher values in the log.
"""

from __future__ import annotations

import time


class LiveClock:
    """Scenario seconds from a shared monotonic start `t0`, played `scale` wall seconds per
    second."""

    def __init__(self, t0: float, scale: float = 1.0):
        self.t0 = t0
        self.scale = scale

    def now(self) -> float:
        return (time.monotonic() - self.t0) / self.scale

    def wall(self, seconds: float) -> float:
        """Wall seconds that `seconds` of scenario time take."""
        return seconds * self.scale

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            time.sleep(seconds * self.scale)

    def sleep_until(self, t: float) -> None:
        self.sleep(t - self.now())

    def monotonic_at(self, t: float) -> float:
        """The time.monotonic() value at scenario time t."""
        return self.t0 + t * self.scale
