"""What a hunt hands back for each broken invariant: the shortest schedule as a scenario file that
`python -m sim run FILE` replays to the same violation, its lease timeline (text and figure) with
the breaking events marked and each fault labelled, the plain-language account, a pytest file that
fails while the bug is there and passes once the queue is fixed, and the same schedule replayed on
real PostgreSQL, saying whether the server shows it too.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from sim.hunting.account import WHAT, Step, account, story
from sim.hunting.runner import Replay, replay
from sim.hunting.search import Found
from sim.hunting.shrink import Step as ShrinkStep
from sim.hunting.space import Schedule, Scope
from sim.scenario.settings import Scenario, dumps


@dataclass
class OnPostgres:
    """The schedule replayed on PostgreSQL: does the server show the violation too?"""

    shows: bool | None  # None: the replay could not run (the reason says why)
    counts: dict[str, int] = field(default_factory=dict)
    reason: str = ""

    def line(self, invariant: str) -> str:
        if self.shows is None:
            return f"PostgreSQL replay: not run ({self.reason})"
        seen = ", ".join(f"{k} {n}" for k, n in sorted(self.counts.items())) or "no violation"
        verdict = "shows it too" if self.shows else f"does NOT show {invariant}"
        return f"PostgreSQL replay: the server {verdict} ({seen})"


@dataclass
class Finding:
    """The shortest schedule found that breaks `invariant`, with everything handed back."""

    invariant: str
    found: Found  # the first schedule that broke it, as the search met it
    schedule: Schedule  # after shrinking
    shrinking: list[ShrinkStep]
    replay: Replay  # the shrunk schedule replayed as `sim run` plays it, judged by sim.check
    steps: list[Step]
    postgres: OnPostgres | None = None
    sql: str | None = None  # the queue directory whose SQL ran, if any

    @property
    def scenario(self) -> Scenario:
        return self.replay.run.scenario

    @property
    def account(self) -> str:
        return account(self.steps, self.invariant)

    @property
    def violations(self) -> list:
        return [v for v in self.replay.report.violations if v.invariant == self.invariant]

    def timeline(self) -> list[str]:
        """The lease timeline as text: one line per step, faults labelled, breaking events
        marked with <<<."""
        lines = [f"{'t (s)':>10}  {'who':8} what"]
        for step in self.steps:
            mark = "  <<< breaks " + self.invariant if step.breaks else ""
            lines.append(f"{step.t:10.3f}  {step.worker or '':8} {step.text}{mark}")
        lines += [f"fault: {f.label()}" for f in self.schedule.faults]
        return lines

    def lines(self) -> list[str]:
        """What the command line prints for this finding."""
        f = self.found
        out = [
            f"{self.invariant}: {WHAT.get(self.invariant, '')}",
            f"  first broke {f.after:.2f} s into the hunt (schedule {f.first + 1}); {f.seen} "
            f"schedule(s) broke it, the smallest (schedule {f.number + 1}, {f.strategy}) shrunk in "
            f"{len(self.shrinking)} steps from {len(f.schedule.faults)} fault(s), "
            f"{f.schedule.workers} worker(s), {f.schedule.jobs} job(s) to:",
            *(f"    {line}" for line in self.schedule.lines()),
            "  " + self.account,
        ]
        if self.postgres is not None:
            out.append("  " + self.postgres.line(self.invariant))
        return out

    def figure(self, ax=None):
        """The lease timeline (sim.plots.lease_timeline) with the breaking events starred and
        each fault labelled."""
        from sim.plots.timeline import lease_timeline

        run = self.replay.run
        ax = lease_timeline(run, ax=ax)
        lanes = {f"w{i}": i for i in range(run.scenario.policy.workers)}
        for step in self.steps:
            if step.breaks and step.worker in lanes:
                ax.plot(step.t, lanes[step.worker], marker="*", ms=16, color="#D55E00", zorder=6)
                ax.annotate(
                    f"breaks {self.invariant}",
                    (step.t, lanes[step.worker]),
                    xytext=(6, -12),
                    textcoords="offset points",
                    fontsize=8,
                    color="#D55E00",
                )
        for fault in self.schedule.faults:
            lane = fault.worker if fault.worker >= 0 else -0.45
            if fault.kind == "db_stall":
                ax.axvspan(fault.at, fault.end, color="#999999", alpha=0.15, zorder=0)
            ax.annotate(
                fault.label(),
                (fault.at, lane),
                xytext=(2, 10),
                textcoords="offset points",
                fontsize=8,
                color="#444444",
            )
        return ax

    # ---- files ------------------------------------------------------------------------------

    def toml(self, source: str) -> str:
        """The scenario file: the schedule's full scenario, with how it was found on top."""
        sql = f" --sql {self.sql}" if self.sql else ""
        head = [
            f"# The shortest schedule `sim hunt` found that breaks {self.invariant}",
            f"# ({WHAT.get(self.invariant, '')}), hunting {source}. Replay it:",
            f"#   python -m sim run THIS_FILE{sql}",
            *(f"# {line}" for line in self.schedule.lines()),
            "",
        ]
        return "\n".join(head) + dumps(self.scenario)

    def pytest(self, toml_name: str) -> str:
        """A test that fails while the queue breaks the invariant under this schedule."""
        sql = repr(self.sql)
        what = WHAT.get(self.invariant, self.invariant)
        fix = f"its SQL in {self.sql}" if self.sql else f"its [policy] in {toml_name}"
        return f'''"""Found by `python -m sim hunt`: the shortest schedule that breaks
{self.invariant} ({what}). This test fails while the queue has the bug and passes once it is
fixed (fix the queue: {fix}). The schedule is the scenario file beside this test."""

from pathlib import Path

import sim

SCENARIO = Path(__file__).with_name({toml_name!r})
SQL = {sql}  # the queue directory whose SQL the hunt ran (None: Lease Lab's own statements)


def test_no_{self.invariant}():
    run = sim.run(SCENARIO, sql=SQL) if SQL else sim.run(SCENARIO)
    broken = [v.detail for v in sim.check(run).violations if v.invariant == {self.invariant!r}]
    assert not broken, {what!r} + ": " + "; ".join(broken)
'''

    def write(self, out: Path, source: str) -> list[Path]:
        """NAME.toml, NAME.txt (timeline, account, shrinking), NAME.png and test_NAME.py."""
        name = self.invariant
        toml = out / f"{name}.toml"
        toml.write_text(self.toml(source), encoding="utf-8")
        text = out / f"{name}.txt"
        shrinking = [f"  {i}. {s.what}" for i, s in enumerate(self.shrinking, 1)]
        text.write_text(
            "\n".join(
                [
                    *self.lines(),
                    "",
                    "timeline:",
                    *self.timeline(),
                    "",
                    "shrinking:",
                    *(shrinking or ["  (already the shortest)"]),
                ]
            )
            + "\n",
            encoding="utf-8",
        )
        figure = out / f"{name}.png"
        ax = self.figure()
        ax.figure.savefig(figure, dpi=110, bbox_inches="tight")
        import matplotlib.pyplot as plt

        plt.close(ax.figure)
        test = out / f"test_{name}.py"
        test.write_text(self.pytest(toml.name), encoding="utf-8")
        return [toml, text, figure, test]


def hand_back(
    scope: Scope, found: Found, schedule: Schedule, shrinking, confirmed: Replay, *, postgres: bool
) -> Finding:
    """A finding's hand-back: the story of its confirmed replay, and (for a hunt on the
    simulated database, when asked) its replay on PostgreSQL."""
    invariant = found.invariant
    events = list(confirmed.run.log)
    steps = story(events, confirmed.run.scenario, invariant, schedule.faults)
    finding = Finding(
        invariant,
        found,
        schedule,
        list(shrinking),
        confirmed,
        steps,
        sql=str(scope.sql.path) if scope.sql is not None else None,
    )
    if scope.sql is not None:
        finding.postgres = OnPostgres(True, dict(confirmed.broken))
    elif postgres:
        finding.postgres = on_postgres(scope, schedule, invariant)
    return finding


def on_postgres(scope: Scope, schedule: Schedule, invariant: str) -> OnPostgres:
    """Replay on PostgreSQL (embedded, or the scope's DSN) with Lease Lab's statements."""
    from sim.db.errors import ServerUnavailableError
    from sim.errors import ConfigError

    try:
        seen = replay(scope, schedule, postgres=True)
    except (ConfigError, ServerUnavailableError, OSError) as exc:  # no server: say so
        return OnPostgres(None, reason=str(exc).splitlines()[0])
    return OnPostgres(invariant in seen.broken, dict(seen.broken))
