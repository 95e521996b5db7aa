"""sim.teaching_caveats: sentences that follow their numbers (issue 15)."""

from __future__ import annotations

import pandas as pd

from sim.teaching_caveats import contention_sentence


def _contention(gap: float, rows: dict[str, tuple[float, float, float]]) -> pd.DataFrame:
    """claim_contention()-shaped rows at 32 workers (and a quieter point at 4 that must be ignored)."""
    frame = [{"claim": claim, "workers": 32, "gap": gap, "drain_time": d, "lock_wait_seconds": w, "lost_claims": lost}
             for claim, (d, w, lost) in rows.items()]
    frame += [{"claim": claim, "workers": 4, "gap": gap, "drain_time": 99.0, "lock_wait_seconds": 0.0,
               "lost_claims": 0.0} for claim in rows]
    return pd.DataFrame(frame)


def test_the_default_gap_shows_skip_locked_first_and_the_convoy():
    frame = _contention(0.05, {"conditional_update": (10.6, 0.0, 2449), "read_then_write": (13.0, 0.008, 0),
                               "select_for_update": (9.41, 130.4, 0), "skip_locked": (5.72, 0.0, 0)})
    assert contention_sentence(frame) == (
        "With 32 workers and a 50 ms gap between read and write, **skip_locked** drained the batch first, in 5.72 s "
        "(select_for_update 9.41 s, conditional_update 10.6 s). The blocking FOR UPDATE spent 130 worker-seconds "
        "waiting on row locks, more than any other strategy: that is the convoy. The conditional UPDATE lost 2449 "
        "claims (no row back) and read them again. All three are *correct*; they differ in how much work the "
        "losers waste.")


def test_a_short_gap_says_in_words_that_for_update_drained_first():
    """Exercise 2's gap = 0.005: FOR UPDATE drains first (4.96 s against 5.72 s); the sentence says
    so instead of claiming SKIP LOCKED won (it used to raise)."""
    frame = _contention(0.005, {"conditional_update": (5.47, 0.0, 65), "read_then_write": (6.23, 0.0, 0),
                                "select_for_update": (4.96, 0.545, 0), "skip_locked": (5.72, 0.0, 0)})
    text = contention_sentence(frame)
    assert text.startswith("With 32 workers and a 5 ms gap between read and write, **select_for_update** drained "
                           "the batch first, in 4.96 s (skip_locked 5.72 s, conditional_update 5.47 s).")
    assert "spent 0.545 worker-seconds waiting on row locks, more than any other strategy" in text
    assert "With the lock held only 5 ms per claim, queueing behind it cost less than it saved here" in text


def test_no_lock_waits_is_no_convoy():
    frame = _contention(0.0, {"select_for_update": (5.0, 0.0, 0), "skip_locked": (5.5, 0.0, 0)})
    assert "waited on no more row locks than the others: no convoy at this gap" in contention_sentence(frame)
