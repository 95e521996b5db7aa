"""What a hunt may claim when it finds nothing: a certificate only for a bounded exhaustive search
that checked every schedule of its grid, with the grid and the scope printed beside it; otherwise
how much of the space it checked, and no claim beyond that."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Certificate:
    """`checked` of the grid's `total` schedules ran on `where` and broke none of `invariants`."""

    checked: int
    total: int
    invariants: tuple[str, ...]
    scope: tuple[str, ...]  # the scope's lines (Scope.lines)
    grid: tuple[str, ...]  # how the grid was made and how big each part is
    where: str  # the simulated database, or PostgreSQL running the queue's own SQL

    @property
    def complete(self) -> bool:
        return self.checked == self.total

    def headline(self) -> str:
        if self.complete:
            return (
                f"all {self.total:,} schedules within this scope checked on {self.where}: "
                f"no violation of {', '.join(self.invariants)}"
            )
        return (
            f"no certificate: {self.checked:,} of the {self.total:,} schedules within this scope "
            f"checked ({self.checked / self.total:.1%}) on {self.where}, no violation among them; "
            "the rest were not checked"
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
    "configurations: every number of workers and jobs up to the scope's, workers polling first "
    "together (w0 first at ties; workers are interchangeable) or staggered by a poll interval "
    "(each worker first at ties in turn); fault-free run of each gives its anchors",
    "a fault starts epsilon before an action (a burst of statements one process sends: a claim, "
    "a heartbeat, a completion, a watcher tick); a crash also epsilon either side of each "
    "statement; a window (pause, partition, stall, heartbeat loss or delay of a TTL) ends "
    "epsilon after an action of another process while it lasts, or after a lease's expiry",
    "every combination of up to max_faults such faults of one configuration is one schedule",
)


def grid_lines(parts, max_faults: int) -> tuple[str, ...]:
    """The grid's rule and its size, part by part."""
    sizes = [
        f"{p.config.workers} worker(s), {p.config.jobs} job(s), phases "
        f"{'together' if not any(p.config.phases) else 'staggered'}"
        f"{', ' + p.config.order[0] + ' first' if p.config.order else ''}: "
        f"{len(p.faults)} single faults, {p.count(max_faults):,} schedules"
        for p in parts
    ]
    return (*GRID_RULE, *sizes)
