"""Completion is fenced by owner + attempt. Late completions refused, completions by a non-owner,
other late writes by a worker that had lost the job; when the scenario has no zombie, the zombie
variant makes some (owners paused past their lease, then carrying on)."""

from __future__ import annotations

from sim.checklist.evidence import Evidence, total
from sim.checklist.verdicts import FAIL, PASS, RISK, Verdict, guarded
from sim.support.in_words import count

KEY = "fencing"
TITLE = "Completion is fenced by owner + attempt"


def refused_effects(runs) -> int:
    """Completions refused after their worker's effect had committed (policy.completion =
    background): an effect record, then a refused completion, of the same lease."""
    total_refused = 0
    for r in runs:
        events = r.events
        lease = ["worker", "job", "attempt"]
        effects = events[events["kind"] == "effect"][lease].drop_duplicates()
        refused = events[events["kind"] == "complete_rejected"][lease]
        total_refused += len(refused.merge(effects, on=lease))
    return total_refused


def zombie_writes(evidence: Evidence, runs) -> tuple[int, int, int]:
    """(completions refused, completions by a non-owner, other late writes by a worker that broke
    an invariant: a finished job overwritten, a held job handed on)."""
    refused = sum(int((r.events["kind"] == "complete_rejected").sum()) for r in runs)
    stolen = evidence.caused(runs, "non_owner_completion", "worker")
    late = evidence.caused(runs, "terminal_overwritten", "worker") + evidence.caused(
        runs, "double_claim", "worker"
    )
    return refused, stolen, late


def check(evidence: Evidence) -> Verdict:
    p = evidence.policy
    variant = ""
    refused, stolen, late = zombie_writes(evidence, evidence.runs)
    used = evidence.runs
    if not (refused or stolen or late):
        zombies = evidence.variant("zombie")
        if zombies:
            used = zombies
            refused, stolen, late = zombie_writes(evidence, zombies)
            evidence.use(KEY, "zombie")
            pause = zombies[0].scenario.faults.pauses[-1].duration
            lost = total(zombies, "false_expiries")
            variant = (
                f" (zombie variant: owners paused {pause:.0f} s mid-job, random crashes off: "
                f"{lost} lost their lease and carried on)"
            )
    undone = refused_effects(used) if p.completion == "background" else 0
    m = {
        "refused_completions": refused,
        "non_owner_completions": stolen,
        "late_worker_writes": late,
        "effects_of_refused_completions": undone,
        "variant": bool(variant),
    }
    return _verdict(evidence, m, variant)


def _verdict(evidence: Evidence, m: dict, variant: str) -> Verdict:
    """Fenced: any completion by a non-owner or other late write fails, none refused is untested;
    unfenced: a risk, a failure once late completions went through."""
    p = evidence.policy
    refused, stolen = m["refused_completions"], m["non_owner_completions"]
    late = m["late_worker_writes"]
    harm = (
        f"; {count(late, 'late write')} by a worker that had lost the job (a completion, "
        "failure or release) overwrote a finished job or handed a held one on"
        if late
        else ""
    )
    if p.completion == "background":
        harm += (
            f"; completion in the background (policy.completion): a refused completion "
            f"undoes nothing, and the effect of "
            f"{count(m['effects_of_refused_completions'], 'refused completion')} had "
            "committed before"
        )
    if p.fencing:
        head = "complete_fenced" if evidence.on else "completion checks owner + attempt"
        text = (
            f"{head}: {count(refused, 'late completion')} refused, "
            f"{count(stolen, 'completion')} by a non-owner{variant}{harm}"
        )
        status, text = guarded(text, stolen + late, refused, "fencing never exercised")
        if status == PASS and m["effects_of_refused_completions"]:
            return RISK, text[:-1] + ": the fence guards the job's row, not the effect.", m
        return status, text, m
    text = (
        f"unfenced completion: {count(stolen, 'completion')} by a worker that had lost the "
        f"job{variant}{harm}"
    )
    if (stolen or late) and not variant:
        return FAIL, text + ": late completions went through.", m
    return RISK, text + ("; a zombie's completion would go through." if not stolen else "."), m
