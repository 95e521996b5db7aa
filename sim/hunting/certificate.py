"""What a hunt may claim when it finds nothing: a certificate only for a bounded exhaustive search
that checked every schedule of its grid, with the grid and the scope printed beside it; otherwise
how much of the space it checked, and no claim beyond that."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Certificate:
    """`checked` schedules of the grid ran on `where` and broke none of `invariants`; `total` is
    the grid's size when the search walked all of it, None when it was cut off first."""

    checked: int
    total: int | None
    invariants: tuple[str, ...]
    scope: tuple[str, ...]  # the scope's lines (Scope.lines)
    grid: tuple[str, ...]  # how the grid was made and how big each part is
    where: str  # the simulated database, or PostgreSQL running the queue's own SQL

    @property
    def complete(self) -> bool:
        return self.total is not None and self.checked == self.total

    def headline(self) -> str:
        if self.complete:
            return (
                f"all {self.total:,} schedules within this scope checked on {self.where}: "
                f"no violation of {', '.join(self.invariants)}"
            )
        return (
            f"no certificate: the search was cut off after {self.checked:,} schedules of the grid "
            f"(on {self.where}), with no violation among them; the rest were not checked"
        )

    def lines(self) -> list[str]:
        return [
            self.headline(),
            "scope:",
            *(f"  {line}" for line in self.scope),
            "grid:",
            *(f"  {line}" for line in self.grid),
        ]


GRID_RULE = (
    "roots: every number of workers and jobs up to the scope's, workers polling first together "
    "(w0 first at ties; workers are interchangeable) or staggered over a poll interval (each "
    "worker first at ties in turn)",
    "each schedule's children add one fault where its own run shows a process acting, no earlier "
    "than its last fault: a crash epsilon before or after one of the worker's statements; a "
    "window (pause, partition, lost or late heartbeats, a database stall) from epsilon before an "
    "action of the worker (or epsilon after its claim) until epsilon after something another "
    "process does while it lasts, or after a lease's expiry; the crash points; clock steps of a "
    "TTL either way with worker clocks",
    "an action is a burst of statements one client sends (a claim, a heartbeat, a completion, a "
    "watcher tick that moved a job); idle polls are not",
)
