"""The demo (`python -m sim demo`): three teaching scenarios, and the race fixed, run once each.

    from sim.demo import demo
    d = demo()              # the runs and their invariant reports
    print(d)                # the summary table and what to look at in each figure
    d.save("out/demo")      # one lease timeline per scenario, and summary.csv

Each scenario runs once, on the memory backend, with its preset's seed: the same figures every time.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import pandas as pd

from sim.invariants import Report
from sim.results import Run, json_number
from sim.runner import run
from sim.scenario.settings import preset
from sim.support import output_paths

SCENARIOS: tuple[tuple[str, str, str, dict[str, object], str], ...] = (
    # (file stem, label, preset, overrides, what to look at)
    (
        "read-then-write-race",
        "read-then-write-race",
        "read-then-write-race",
        {},
        "SELECT, then UPDATE: two workers take the same job (red outlines) and both charge it.",
    ),
    (
        "read-then-write-race-conditional-update",
        "read-then-write-race (fixed)",
        "read-then-write-race",
        {"policy.claim": "conditional_update", "expect": []},
        "The same load with one atomic UPDATE ... WHERE: no job is claimed twice.",
    ),
    (
        "crash-recovery",
        "crash-recovery",
        "crash-recovery",
        {},
        "A crashed owner's lease stays valid in the DB until it lapses; the watcher requeues the "
        "job.",
    ),
    (
        "gc-pause-zombie",
        "gc-pause-zombie",
        "gc-pause-zombie",
        {},
        "A 45 s pause outlives a 15 s lease: the zombie's completion is refused, but the PSP "
        "charged twice.",
    ),
)
COLUMNS = {  # summary.csv column -> printed header
    "scenario": "scenario",
    "claim": "claim",
    "jobs": "jobs",
    "completed": "completed",
    "leases": "leases",
    "double_claims": "double claims",
    "false_expiries": "false expiries",
    "crashes": "crashes",
    "recovery_latency_mean": "recovery (s)",
    "duplicate_db_effects": "dup. DB effects",
    "duplicate_external_effects": "dup. PSP charges",
    "invariants": "invariants",
    "figure": "figure",
}


@dataclass
class Demo:
    """The demo's runs (one per entry of SCENARIOS, in order) and their invariant reports."""

    runs: list[Run]
    reports: list[Report]

    @property
    def ok(self) -> bool:
        """No run broke an invariant it did not expect."""
        return all(report.ok for report in self.reports)

    @cached_property
    def table(self) -> pd.DataFrame:
        """summary.csv: one row per scenario, the COLUMNS metrics and its figure's file name."""
        rows = []
        for (stem, label, *_), result, report in zip(
            SCENARIOS, self.runs, self.reports, strict=True
        ):
            s = result.summary
            rows.append(
                {
                    "scenario": label,
                    "claim": result.scenario.policy.claim,
                    **{k: json_number(k, s[k]) for k in COLUMNS if k in s.index},
                    "invariants": verdict(report),
                    "figure": f"{stem}.png",
                }
            )
        return pd.DataFrame(rows, columns=list(COLUMNS))

    def __str__(self) -> str:
        shown = self.table.drop(columns=["jobs", "figure"]).rename(columns=COLUMNS)
        shown["invariants"] = [verdict(r, short=True) for r in self.reports]
        captions = [f"{stem}.png: {caption}" for stem, *_, caption in SCENARIOS]
        table = shown.to_string(index=False, float_format=lambda v: f"{v:.1f}", na_rep="-")
        return "\n".join([table, "", *captions])

    def save(self, directory: str | Path, *, overwrite: bool = False) -> list[Path]:
        """Write one lease timeline per scenario (STEM.png) and summary.csv into `directory`
        (created if missing; one that holds files only with `overwrite`)."""
        from sim.plots.timeline import save_timeline

        out = output_paths.directory(directory, overwrite)
        written = [
            save_timeline(result, out / f"{stem}.png")
            for (stem, *_), result in zip(SCENARIOS, self.runs, strict=True)
        ]
        self.table.to_csv(out / "summary.csv", index=False)
        return [*written, out / "summary.csv"]


def demo() -> Demo:
    """Run the demo's scenarios on the memory backend, each with its preset's seed."""
    runs = []
    for _stem, _label, name, overrides, _caption in SCENARIOS:
        scenario = preset(name)
        runs.append(run(scenario.with_overrides(overrides) if overrides else scenario, "memory"))
    return Demo(runs, [result.check() for result in runs])


def verdict(report: Report, short: bool = False) -> str:
    """The invariants column: which invariants broke, unexpected and expected ('all hold' if
    none); `short`, as printed: how many unexpected violations, or ok."""
    unexpected = sorted({v.invariant for v in report.unexpected})
    expected = sorted(set(report.counts()) - set(unexpected))
    if short:
        if unexpected:
            return f"{len(report.unexpected)} UNEXPECTED"
        return f"ok ({len(report.violations)} expected)" if expected else "ok"
    parts = []
    if unexpected:
        parts.append("UNEXPECTED: " + ", ".join(unexpected))
    if expected:
        parts.append("expected: " + ", ".join(expected))
    return "; ".join(parts) or "all hold"
