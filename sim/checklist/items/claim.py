"""Item 1: the claim is one atomic UPDATE ... WHERE. Double claims counted in the scenario's runs
and under contention (8+ workers on a 200-job batch)."""

from __future__ import annotations

from sim.checklist.evidence import Evidence, total
from sim.checklist.verdicts import FAIL, PASS, RISK, Verdict
from sim.support.in_words import count, percent

KEY = "claim"
TITLE = "1. The claim is one atomic UPDATE ... WHERE, not read-then-write"
CLAIMS = {
    "conditional_update": "one conditional UPDATE ... WHERE ... RETURNING",
    "skip_locked": "one UPDATE ... FROM (SELECT ... FOR UPDATE SKIP LOCKED)",
    "select_for_update": "SELECT ... FOR UPDATE, then UPDATE, in one transaction",
    "read_then_write": "SELECT, then an unconditional UPDATE",
}


def check(evidence: Evidence) -> Verdict:
    p, runs = evidence.policy, evidence.runs
    doubles, leases = evidence.caused(runs, "double_claim", "claim"), total(runs, "leases")
    handed = evidence.caused(runs, "double_claim", "watcher", "worker")
    numbers = {"double_claims": doubles, "leases": leases}
    how = "the queue's statements" if evidence.on else CLAIMS[p.claim]
    text = (
        f"{p.claim} ({how}): {count(doubles, 'double claim')} in {count(leases, 'lease')} over "
        f"{evidence.n_runs}"
    )
    if doubles:
        text += f" ({percent(doubles / leases)} of leases)"
    contention = evidence.variant("contention")
    evidence.use(KEY, "contention")
    if contention:
        vd, vl = evidence.caused(contention, "double_claim", "claim"), total(contention, "leases")
        handed += evidence.caused(contention, "double_claim", "watcher", "worker")
        numbers.update(variant_double_claims=vd, variant_leases=vl)
        workers = contention[0].scenario.policy.workers
        text += (
            f"; under contention ({count(workers, 'worker')}, 200 jobs at once): "
            f"{count(vd, 'double claim')} in {count(vl, 'lease')}"
            + (f" ({percent(vd / vl)})" if vd else "")
        )
    numbers["handed_double_claims"] = handed
    if handed:
        text += (
            f" ({count(handed, 'other double claim')} took a job that a watcher's or a late "
            "worker's write had made Pending while its lease ran: items 4 and fencing)"
        )
    return _verdict(evidence, text, numbers)


def _verdict(evidence: Evidence, text: str, numbers: dict) -> Verdict:
    """A read-then-write claim fails by design; one that double-claimed fails on the user's queue
    and is a risk in the model (the atomic claim raced only through skewed clocks)."""
    p = evidence.policy
    doubles = numbers["double_claims"] or numbers.get("variant_double_claims", 0)
    if p.claim == "read_then_write" and not evidence.on:
        return FAIL, text + ". Two workers can read the same Pending row and both win.", numbers
    if doubles and evidence.on:
        return FAIL, text + ": two workers held one job at once.", numbers
    if doubles:
        cause = " (worker clocks are skewed: policy.clock = worker)" if p.clock == "worker" else ""
        return (
            RISK,
            text + f"{cause}: the claim is atomic, yet two workers held one job at once.",
            numbers,
        )
    return PASS, text + ".", numbers
