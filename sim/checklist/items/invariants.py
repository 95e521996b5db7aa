"""The last item: no run breaks an invariant. Every violation sim.check finds in the scenario's
runs and in its variants' runs (the variants built for the other items), counted per invariant,
with an example."""

from __future__ import annotations

from sim.checklist.evidence import Evidence
from sim.checklist.verdicts import FAIL, PASS, Verdict
from sim.scenario.settings import INVARIANTS
from sim.support.in_words import count

KEY = "invariants"
TITLE = "No run breaks an invariant (every violation sim.check finds, counted)"


def check(evidence: Evidence) -> Verdict:
    sets = [("the scenario's runs", evidence.runs)] + [
        (f"the {name} variant", runs) for name, runs in evidence.variants.items() if runs
    ]
    evidence.use(KEY, *(name for name, runs in evidence.variants.items() if runs))
    found: dict[str, dict[str, int]] = {}
    example: dict[str, tuple] = {}
    for where, runs in sets:
        for r in runs:
            for v in evidence.report(r).violations:
                counts = found.setdefault(v.invariant, {})
                counts[where] = counts.get(where, 0) + 1
                run_of = "the scenario's run" if runs is evidence.runs else f"{where}'s run"
                example.setdefault(v.invariant, (v, f"{run_of} of seed {r.scenario.seed}"))
    n_runs = sum(len(runs) for _, runs in sets)
    m = {name: sum(found.get(name, {}).values()) for name in INVARIANTS}
    m["runs"] = n_runs
    if not found:
        return (
            PASS,
            f"all {len(INVARIANTS)} invariants held in {count(n_runs, 'run')} (the scenario's "
            "and its variants').",
            m,
        )
    parts = []
    for name in INVARIANTS:
        if name not in found:
            continue
        where = ", ".join(f"{n} in {w}" for w, n in found[name].items())
        expected = " (the scenario expects it)" if name in evidence.scenario.expect else ""
        v, seen_in = example[name]
        job = f"job {v.job} " if v.job is not None else ""
        parts.append(
            f"{name} {sum(found[name].values())}: {where}{expected}; e.g. {job}in {seen_in}: "
            f"{v.detail}"
        )
    return (
        FAIL,
        f"{len(found)} of {len(INVARIANTS)} invariants broken in {count(n_runs, 'run')}: "
        + "; ".join(parts)
        + ".",
        m,
    )
