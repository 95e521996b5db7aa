"""The review's checklist items, one module each, in the order the review prints them (1-6 are the
seed's checklist). Each module holds its item's title, what it measures on the runs and its
verdict rule: `check(evidence)` -> (status, evidence text, the numbers behind it), where evidence
is sim.checklist.evidence.Evidence (the runs, and the variants built on first use)."""

from __future__ import annotations

from collections.abc import Callable

from sim.checklist.evidence import Evidence
from sim.checklist.items import (
    attempts,
    claim,
    dedup,
    fencing,
    heartbeat,
    invariants,
    owner,
    psp,
    ttl,
    watcher,
)
from sim.checklist.verdicts import Verdict

_MODULES = (claim, ttl, heartbeat, watcher, owner, attempts, fencing, dedup, psp, invariants)
ITEMS = {m.KEY: m.TITLE for m in _MODULES}  # check key -> checklist item
CHECKS: dict[str, Callable[[Evidence], Verdict]] = {m.KEY: m.check for m in _MODULES}
