"""sim.hunt(): search the fault schedules of a queue for the shortest timeline that breaks an
invariant, and hand it back (or, exhaustively, a certificate for a stated scope).

    result = sim.hunt("read-then-write-race", time=10)
    print(result)                 # what broke, the shortest schedule, its story; or the coverage
    result.save("out/hunt")       # per invariant: NAME.toml (sim run replays it), NAME.txt,
                                  # NAME.png, test_NAME.py; hunt.txt, hunt.json
    sim.hunt("baseline", exhaustive=True, max_faults=1, invariant="non_owner_completion")
"""

from __future__ import annotations

import dataclasses
import json
import math
import time as clock
from dataclasses import dataclass
from pathlib import Path

from sim.errors import ConfigError
from sim.hunting.certificate import GRID_RULE, Certificate
from sim.hunting.grid import Grid
from sim.hunting.handback import Finding, hand_back
from sim.hunting.runner import execute, replay
from sim.hunting.search import Coverage, Found, search
from sim.hunting.shrink import nearest, shrink
from sim.hunting.space import Schedule, Scope, make_scope
from sim.scenario.settings import INVARIANTS, prepared
from sim.support import output_paths

SCREEN_SHARE, SCREEN_MAX = 1 / 6, 5.0  # a --sql hunt's screen on the simulated database: of its
# time, at most this share and this many seconds
MAX_SECONDS = 7 * 24 * 3600.0


@dataclass
class HuntResult:
    """What a hunt found (per invariant, the shortest schedule and its hand-back), how much of the
    space it checked, and, for an exhaustive search that checked its whole grid and found
    nothing, the certificate."""

    source: str
    scope: Scope
    seed: int
    exhaustive: bool
    findings: dict[str, Finding]
    coverage: Coverage
    certificate: Certificate | None
    screen: Coverage | None = None  # a --sql hunt's screening on the simulated database

    @property
    def where(self) -> str:
        return (
            "PostgreSQL (the queue's own SQL)"
            if self.scope.sql is not None
            else ("the simulated database")
        )

    @property
    def exit_code(self) -> int:
        """The command line's: 1 when an invariant broke, 0 when none did within scope and time."""
        return 1 if self.findings else 0

    def lines(self) -> list[str]:
        out = [f"hunt of {self.source} on {self.where}, seed {self.seed}", "scope:"]
        out += [f"  {line}" for line in self.scope.lines()]
        if self.screen is not None:
            out += [f"screen on the simulated database: {line}" for line in self.screen.lines()]
        out += self.coverage.lines()
        for finding in self.findings.values():
            out += ["", *finding.lines()]
        if not self.findings:
            out.append("")
            if self.certificate is not None:
                out += self.certificate.lines()
            else:
                out.append(
                    f"no violation among the {self.coverage.checked:,} schedules checked; not a "
                    "certificate (only --exhaustive, run to the end of its grid, gives one)"
                )
        return out

    def __str__(self) -> str:
        return "\n".join(self.lines())

    def summary(self) -> dict:
        """The hunt as JSON-able data (hunt.json)."""
        c = self.coverage
        return {
            "source": self.source,
            "seed": self.seed,
            "where": self.where,
            "exhaustive": self.exhaustive,
            "scope": self.scope.lines(),
            "coverage": {
                "checked": c.checked,
                "by_strategy": dict(c.by_strategy),
                "grid_total": c.grid_total,
                "grid_checked": c.grid_checked,
                "seconds": round(c.seconds, 3),
                "schedules_per_second": round(c.rate, 1),
                "stopped": c.stopped,
            },
            "findings": {
                name: {
                    "first_broke_after_seconds": round(f.found.after, 3),
                    "first_broke_at_schedule": f.found.first + 1,
                    "schedules_that_broke_it": f.found.seen,
                    "smallest_at_schedule": f.found.number + 1,
                    "strategy": f.found.strategy,
                    "shrink_steps": len(f.shrinking),
                    "schedule": f.schedule.lines(),
                    "account": f.account,
                    "violations": [v.detail for v in f.violations],
                    "postgres": None if f.postgres is None else f.postgres.line(name),
                }
                for name, f in self.findings.items()
            },
            "certificate": None if self.certificate is None else self.certificate.lines(),
        }

    def save(self, directory: str | Path, *, overwrite: bool = False) -> list[Path]:
        """Write each finding's NAME.toml, NAME.txt, NAME.png and test_NAME.py, plus hunt.txt
        (as printed) and hunt.json, into `directory` (created if missing; one that holds files
        only with `overwrite`)."""
        out = output_paths.directory(directory, overwrite)
        written = []
        for finding in self.findings.values():
            written += finding.write(out, self.source)
        text = out / "hunt.txt"
        text.write_text(str(self) + "\n", encoding="utf-8")
        data = out / "hunt.json"
        data.write_text(json.dumps(self.summary(), indent=2) + "\n", encoding="utf-8")
        return [*written, text, data]

    def save_report(self, path: str | Path, *, overwrite: bool = False) -> Path:
        """One self-contained HTML page: the shortest bad timeline of each broken invariant (or
        the certificate and its scope)."""
        from sim.hunting.report import hunt_report

        return hunt_report(self, output_paths.check_report(path, overwrite))


def hunt(
    scenario,
    *,
    sql=None,
    dsn: str | None = None,
    time: float = 60.0,
    workers: int = 2,
    jobs: int = 2,
    max_faults: int = 3,
    exhaustive: bool = False,
    seed: int = 0,
    invariant=None,
    kinds=None,
    parallel: int = 1,
    executor=None,
    schedules: int | None = None,
    postgres: bool = True,
    shrink_time: float | None = None,
    progress=None,
    announce=None,
    **overrides,
) -> HuntResult:
    """Search the schedules of `scenario` (a preset name, a TOML path or a Scenario; dotted
    `overrides` apply, e.g. **{"policy.fencing": False}) for violations of `invariant` (a name or
    a list; default every one), within `workers`, `jobs` and `max_faults`, for `time` seconds or
    `schedules` candidates. `sql`: a queue directory, run on PostgreSQL (`dsn`, or the embedded
    server). `exhaustive`: walk the grid alone and, if it ends with nothing, certify it.
    `parallel`: local processes; `executor`: any concurrent.futures Executor (a Dask client's).
    `postgres`: replay each finding on PostgreSQL too. Shrinking gets `shrink_time` seconds per
    finding (default: half of `time`, at most 30). `announce()` is called once the search begins
    (the command line says then that Ctrl-C stops it and reports)."""
    began = clock.perf_counter()
    source = str(scenario) if not hasattr(scenario, "name") else scenario.name
    _check_options(time, parallel, seed, schedules, shrink_time, executor)
    scope = _scope(scenario, sql, dsn, overrides, workers, jobs, max_faults, kinds, invariant)
    memory = dataclasses.replace(scope, sql=None)  # the grid's anchors; a --sql hunt's screen
    shrink_time = min(30.0, time / 2) if shrink_time is None else shrink_time
    options = dict(exhaustive=exhaustive, executor=executor, workers=parallel, progress=progress)
    screen: Coverage | None = None
    lead: list[tuple[str, Schedule]] = []
    grid = Grid(memory)
    if announce is not None:
        announce()
    if scope.sql is not None:
        seconds = min(time * SCREEN_SHARE, SCREEN_MAX)
        screen, lead = _screen(memory, seed, seconds, schedules, began, options)
        time -= screen.seconds
    found, coverage = search(
        scope, grid, seed=seed, seconds=time, schedules=schedules, lead=lead, began=began, **options
    )
    findings = {}
    for name in sorted(found, key=INVARIANTS.index):
        finding = _finish(scope, found[name], shrink_time, postgres)
        if finding is not None:
            findings[name] = finding
    certificate = None
    if exhaustive and not findings:
        total = coverage.grid_total if coverage.stopped == "exhausted" else None
        certificate = Certificate(
            coverage.grid_checked,
            total,
            scope.invariants,
            tuple(scope.lines()),
            (*GRID_RULE, *grid.lines()),
            "PostgreSQL (the queue's own SQL)"
            if scope.sql is not None
            else "the simulated database",
        )
    return HuntResult(source, scope, seed, exhaustive, findings, coverage, certificate, screen)


def _scope(scenario, sql, dsn, overrides, workers, jobs, max_faults, kinds, invariant) -> Scope:
    """The hunt's scope: the scenario with a queue's settings (queue.toml) and the overrides,
    and that queue checked on its server before anything runs."""
    queue = None
    if sql is not None:
        from sim.db.queue.directory import loaded
        from sim.runner import checked_queue

        queue = loaded(sql)
    scenario, queue = prepared(scenario, overrides, queue=queue)
    invariants = _invariants(invariant)
    if queue is not None:
        queue, dsn = checked_queue(queue, dsn, [scenario])
    scope = make_scope(
        scenario,
        workers=workers,
        jobs=jobs,
        max_faults=max_faults,
        kinds=kinds,
        invariants=invariants,
        sql=queue,
        dsn=dsn,
    )
    if queue is not None:
        queue.require(scope.base)
    return scope


def _screen(memory: Scope, seed, seconds, schedules, began, options) -> tuple[Coverage, list]:
    """A --sql hunt's screen: the simulated database searches under the queue's settings for
    `seconds`; what breaks there (shrunk, and as found) goes first on the server."""
    found, screen = search(
        memory,
        Grid(memory),
        seed=seed,
        seconds=seconds,
        schedules=schedules,
        began=began,
        **options,
    )
    lead: list[tuple[str, Schedule]] = []
    for f in sorted(found.values(), key=lambda f: f.number):
        best, _ = shrink(f.schedule, _breaks(memory, f.invariant), memory, seconds=2.0)
        lead += [("screen", best), ("screen", f.schedule)]
    return screen, lead


def _breaks(scope: Scope, invariant: str):
    if scope.sql is None:
        return lambda s: invariant in execute(scope, s).broken
    return lambda s: invariant in replay(scope, s).broken


def _finish(scope: Scope, found: Found, seconds: float, postgres: bool) -> Finding | None:
    """Shrink, confirm with sim.check on a replay (falling back to the schedule as found if the
    shrunk one does not confirm), and hand back."""
    breaks = _breaks(scope, found.invariant)
    start = (
        nearest(scope, found.schedule, breaks, seconds=seconds / 3)
        if scope.sql is None
        else found.schedule
    )
    best, steps = shrink(start, breaks, scope, seconds=seconds)
    for schedule, shrinking in ((best, steps), (found.schedule, [])):
        confirmed = replay(scope, schedule)
        if found.invariant in confirmed.broken:
            return hand_back(scope, found, schedule, shrinking, confirmed, postgres=postgres)
    return None  # the screen and sim.check disagree: tests/hunting/test_runner.py guards this


def _invariants(invariant) -> tuple[str, ...] | None:
    if invariant is None:
        return None
    names = (invariant,) if isinstance(invariant, str) else tuple(invariant)
    if not names:
        raise ConfigError(f"invariant: give one or more of {', '.join(INVARIANTS)}")
    return names


def _check_options(time, parallel, seed, schedules, shrink_time, executor) -> None:
    def number(value) -> bool:
        return (
            isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
        )

    def whole(value) -> bool:
        return isinstance(value, int) and not isinstance(value, bool)

    rules = [
        (number(time) and 0 < time <= MAX_SECONDS, "time", f"seconds, from 0 to {MAX_SECONDS:g}"),
        (whole(parallel) and 1 <= parallel <= 256, "parallel", "a number of processes, 1 to 256"),
        (whole(seed) and 0 <= seed < 2**63, "seed", "a whole number from 0 to 2**63 - 1"),
        (
            schedules is None or (whole(schedules) and schedules >= 1),
            "schedules",
            "a number of schedules >= 1 (or none: until time runs out)",
        ),
        (
            shrink_time is None or (number(shrink_time) and shrink_time >= 0),
            "shrink_time",
            "seconds >= 0",
        ),
        (
            executor is None or callable(getattr(executor, "submit", None)),
            "executor",
            "a concurrent.futures.Executor (e.g. a Dask client's get_executor())",
        ),
    ]
    for ok, key, allowed in rules:
        if not ok:
            raise ConfigError(f"{key}: expected {allowed}")


__all__ = ["HuntResult", "Schedule", "hunt"]
