"""Sentences that follow the numbers beside them, whatever the parameters or the mode.

A notebook claim that fails raises (teaching.claim); these helpers are for the sentences a
reader's own values, or fast mode's small runs, can legitimately turn around: they say in words
what the numbers show, and say so when the runs are too small to support the lesson's sentence.
(New module for issue 15; it belongs with the other teaching helpers in sim.teaching.)
"""

from __future__ import annotations

import pandas as pd


def contention_sentence(frame: pd.DataFrame) -> str:
    """02: what the busiest point of teaching.claim_contention() shows, in words that follow its
    numbers: which strategy drained the batch first, and what the blocking FOR UPDATE's convoy
    cost there (a short select-to-update gap shrinks it until FOR UPDATE may even be fastest)."""
    most = int(frame["workers"].max())
    busiest = frame[frame["workers"] == most].groupby("claim").mean(numeric_only=True)
    drain, waits = busiest["drain_time"], busiest["lock_wait_seconds"]
    gap_ms = 1000 * float(frame["gap"].iloc[0])
    fastest = str(drain.idxmin())
    text = (f"With {most} workers and a {gap_ms:g} ms gap between read and write, **{fastest}** drained the batch "
            f"first, in {drain[fastest]:.3g} s")
    others = [s for s in ("skip_locked", "select_for_update", "conditional_update") if s in drain.index and s != fastest]
    if others:
        text += " (" + ", ".join(f"{s} {drain[s]:.3g} s" for s in others) + ")"
    text += "."
    if "select_for_update" in waits.index:
        convoy = float(waits["select_for_update"])
        if convoy > 0 and waits.idxmax() == "select_for_update":
            text += (f" The blocking FOR UPDATE spent {convoy:.3g} worker-seconds waiting on row locks, more than any "
                     "other strategy: that is the convoy.")
        else:
            text += " The blocking FOR UPDATE waited on no more row locks than the others: no convoy at this gap."
        if fastest == "select_for_update":
            text += (f" With the lock held only {gap_ms:g} ms per claim, queueing behind it cost less than it saved "
                     "here: the convoy is the price of holding a row lock for the whole gap, and it grows with the gap.")
    if "conditional_update" in busiest.index:
        text += (f" The conditional UPDATE lost {busiest.loc['conditional_update', 'lost_claims']:.0f} claims "
                 "(no row back) and read them again.")
    return text + " All three are *correct*; they differ in how much work the losers waste."
