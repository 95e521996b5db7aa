"""What the checklist items measure on: the scenario's runs, the variants built for them on first
use (sim.checklist.variants), each run's invariant report, and what each item's evidence rested
on, in words ("basis")."""

from __future__ import annotations

from sim.checklist.parallel_runs import run_all
from sim.checklist.variants import ahead_of_time, seed_variant, variant_scenario
from sim.scenario.settings import Scenario
from sim.support.in_words import count, plural


def total(runs, key: str) -> int:
    """A summary figure summed over runs."""
    return int(sum(int(r.summary[key]) for r in runs))


def deleted_note(n: int) -> str:
    """The note for jobs a queue deleted once finished (not in the final table to be judged)."""
    return (
        f" ({count(n, 'finished job')} deleted from the table by the queue, not judged)"
        if n
        else ""
    )


def basis_words(name: str | None, runs) -> str:
    """'baseline: seeds 1, 2, 3; 1234 leases observed; simulated t = 0-600 s each'."""
    seeds = ", ".join(str(r.scenario.seed) for r in runs)
    horizons = sorted({float(r.scenario.horizon) for r in runs})
    interval = (
        f"t = 0-{horizons[0]:.5g} s each"
        if len(horizons) == 1
        else f"t = 0-{horizons[0]:.5g} s to 0-{horizons[-1]:.5g} s"
    )
    head = f"{name}: " if name else ""
    return (
        f"{head}{plural(len(runs), 'seed')} {seeds}; {count(total(runs, 'leases'), 'lease')} "
        f"observed; simulated {interval}"
    )


class Evidence:
    """The runs the items are judged on; builds (and caches) the variants they ask for."""

    def __init__(
        self, scenario: Scenario, runs: list, allow_variants: bool, on: dict | None = None
    ):
        self.scenario = scenario
        self.on = on or {}  # sql= and dsn= for every run: the user's queue on PostgreSQL
        self.policy = scenario.policy
        self.runs = runs
        self.allow_variants = allow_variants
        self.variants: dict[str, list] = {}
        self.n = len(runs)
        self.used: dict[str, list[str]] = {}  # item -> names of the variants its evidence also used
        self._reports: dict[int, object] = {}  # id(run) -> its sim.check report, checked once
        self._ahead: dict[str, list] = {}  # variants run ahead of time, until an item asks

    @classmethod
    def gathered(
        cls, scenario: Scenario, seeds: tuple[int, ...], allow_variants: bool, on: dict
    ) -> Evidence:
        """The scenario's runs for `seeds`, run in one batch with the variants every review asks
        for (sim.checklist.variants.ahead_of_time), side by side where they can be."""
        planned = {
            name: [v for v in (seed_variant(name, scenario, s) for s in seeds) if v is not None]
            for name in (ahead_of_time(scenario) if allow_variants else ())
        }
        done = run_all(
            [scenario.replace(seed=s) for s in seeds] + [v for vs in planned.values() for v in vs],
            on,
        )
        evidence = cls(scenario, done[: len(seeds)], allow_variants, on)
        start = len(seeds)
        for name, scenarios in planned.items():
            evidence._ahead[name] = done[start : start + len(scenarios)]
            start += len(scenarios)
        return evidence

    def report(self, run):
        """The run's invariant report (sim.check), computed once per run."""
        found = self._reports.get(id(run))
        if found is None:
            found = self._reports[id(run)] = run.check()
        return found

    def caused(self, runs, invariant: str, *causes: str) -> int:
        """Violations of `invariant` in `runs` whose breaking write was one of `causes`' (the
        claim, the watcher, a worker's late write: sim.invariants.Violation.cause)."""
        return sum(
            v.invariant == invariant and v.cause in causes
            for r in runs
            for v in self.report(r).violations
        )

    def basis(self, key: str) -> str:
        """What an item's verdict rests on: scenario (and variants), seeds, leases observed,
        interval."""
        parts = [basis_words(self.scenario.name, self.runs)]
        for name in self.used.get(key, []):
            runs = self.variants.get(name) or []
            if runs:
                words = basis_words(None, runs)
                parts.append(f"{name} variant ({runs[0].scenario.name}): {words}")
        return "; ".join(parts)

    def use(self, key: str, *names: str) -> None:
        """Note that item `key`'s evidence also rests on these variants (those that ran)."""
        self.used.setdefault(key, []).extend(n for n in names if self.variants.get(n))

    @property
    def n_runs(self) -> str:
        return count(self.n, "run")

    def variant(self, name: str) -> list:
        """The runs of a variant, one per seed (built on first use); [] if variants are off."""
        if not self.allow_variants:
            return []
        if name in self._ahead:
            self.variants[name] = self._ahead.pop(name)
        if name not in self.variants:
            scenarios = [
                s
                for s in (variant_scenario(name, self.scenario, base) for base in self.runs)
                if s is not None
            ]
            self.variants[name] = run_all(scenarios, self.on)
        return self.variants[name]
