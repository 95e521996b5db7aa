"""sim.teaching.caveats: sentences that follow their numbers (issue 15)."""

from __future__ import annotations

import pandas as pd

from sim.teaching.caveats import (
    contention_sentence,
    duplicate_charge_sentence,
    false_expiry_caveat,
    false_expiry_target_sentence,
    leases_to_show,
    recovery_theory_sentence,
)
from sim.theory.stats import wilson_interval


def _contention(gap: float, rows: dict[str, tuple[float, float, float]]) -> pd.DataFrame:
    """claim_contention()-shaped rows at 32 workers (and a quieter point at 4 that must
    be ignored)."""
    frame = [
        {
            "claim": claim,
            "workers": 32,
            "gap": gap,
            "drain_time": d,
            "lock_wait_seconds": w,
            "lost_claims": lost,
        }
        for claim, (d, w, lost) in rows.items()
    ]
    frame += [
        {
            "claim": claim,
            "workers": 4,
            "gap": gap,
            "drain_time": 99.0,
            "lock_wait_seconds": 0.0,
            "lost_claims": 0.0,
        }
        for claim in rows
    ]
    return pd.DataFrame(frame)


def test_the_default_gap_shows_skip_locked_first_and_the_convoy():
    frame = _contention(
        0.05,
        {
            "conditional_update": (10.6, 0.0, 2449),
            "read_then_write": (13.0, 0.008, 0),
            "select_for_update": (9.41, 130.4, 0),
            "skip_locked": (5.72, 0.0, 0),
        },
    )
    assert contention_sentence(frame) == (
        "With 32 workers and a 50 ms gap between read and write, **skip_locked** drained the "
        "batch first, in 5.72 s (select_for_update 9.41 s, conditional_update 10.6 s). The "
        "blocking FOR UPDATE spent 130 worker-seconds waiting on row locks, more than any other "
        "strategy: that is the convoy. The conditional UPDATE lost 2449 claims (no row back) and "
        "read them again. All three are *correct*; they differ in how much work the losers waste."
    )


def test_a_short_gap_says_in_words_that_for_update_drained_first():
    """Exercise 2's gap = 0.005: FOR UPDATE drains first (4.96 s against 5.72 s); the sentence says
    so instead of claiming SKIP LOCKED won (it used to raise)."""
    frame = _contention(
        0.005,
        {
            "conditional_update": (5.47, 0.0, 65),
            "read_then_write": (6.23, 0.0, 0),
            "select_for_update": (4.96, 0.545, 0),
            "skip_locked": (5.72, 0.0, 0),
        },
    )
    text = contention_sentence(frame)
    assert text.startswith(
        "With 32 workers and a 5 ms gap between read and write, **select_for_update** drained "
        "the batch first, in 4.96 s (skip_locked 5.72 s, conditional_update 5.47 s)."
    )
    assert "spent 0.545 worker-seconds waiting on row locks, more than any other strategy" in text
    assert (
        "With the lock held only 5 ms per claim, queueing behind it cost less than it saved here"
        in text
    )


def test_no_lock_waits_is_no_convoy():
    frame = _contention(0.0, {"select_for_update": (5.0, 0.0, 0), "skip_locked": (5.5, 0.0, 0)})
    assert (
        "waited on no more row locks than the others: no convoy at this gap"
        in contention_sentence(frame)
    )


def _recovery_table(theory: list[float], means: list[float], half: float = 5.0) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "policy.watcher_interval": [5.0, 30.0, 120.0],
            "recovery_latency_mean_mean": means,
            "recovery_latency_mean_ci_low": [m - half for m in means],
            "recovery_latency_mean_ci_high": [m + half for m in means],
            "theory": theory,
        }
    )


def test_04_fast_mode_says_a_miss_at_w_120_comes_from_six_replications():
    """The issue's case: 6 replications, the theory (86 s) below the interval at W = 120 s."""
    table = _recovery_table([28.5, 41.0, 86.0], [27.2, 39.7, 118.0], half=26.0)
    text = recovery_theory_sentence(table, replications=6, fast=True)
    assert text.startswith(
        "The theory lies inside the 95% confidence interval at 2 of 3 watcher intervals; it "
        "misses at W = 120 s (theory 86 s, simulated 118 s, interval 92 to 144 s). With 6 runs "
        "per point a miss says little"
    )
    assert "recovery grows by 0.81 s per second of watcher interval (the theory: 0.5)" in text
    assert text.endswith(
        "Fast mode runs only 6 replications per watcher interval; the full run (`fast = False`, or "
        "LEASELAB_FAST unset) runs more."
    )


def test_04_full_mode_inside_every_interval_claims_half_the_interval():
    table = _recovery_table([28.5, 41.0, 86.0], [28.0, 41.5, 86.5])
    text = recovery_theory_sentence(table, replications=100, fast=False)
    assert text == (
        "The theory lies inside the 95% confidence interval at 3 of 3 watcher intervals. Fitted "
        "over the points, recovery grows by 0.51 s per second of watcher interval (the theory: "
        "0.5), from 28 s at W = 5 s to 86.5 s at W = 120 s."
    )
    missed = recovery_theory_sentence(
        _recovery_table([28.5, 41.0, 86.0], [28.0, 41.5, 95.0], half=2.0),
        replications=100,
        fast=False,
    )
    assert (
        "it misses at W = 120 s" in missed
        and "With 95% intervals, a point may miss by chance." in missed
    )
    assert "Fast mode" not in missed


def _false_expiry_table() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "policy.heartbeat": [False, False, True, True],
            "policy.lease_ttl": [5.0, 80.0, 5.0, 80.0],
            "false_expiries": [135, 2, 5, 0],
            "leases": [300, 300, 300, 300],
            "rate": [0.45, 2 / 300, 5 / 300, 0.0],
            "low": [0.39, 0.0018, 0.007, 0.0],
            "high": [0.51, 0.024, 0.038, 0.0127],
        }
    )


def test_03_says_a_zero_count_cannot_test_a_one_in_a_million_theory():
    theory = {(5.0, False): 0.43, (80.0, False): 0.006, (5.0, True): 0.011, (80.0, True): 6.6e-7}
    text = false_expiry_caveat(
        _false_expiry_table(), lambda ttl, beat: theory[(ttl, beat)], fast=True
    )
    assert text == (
        "What these runs can and cannot show: with a heartbeat, no false expiry was seen at TTL "
        "80 s: in 300 leases that only bounds the rate below 0.013 (the down-pointing markers), "
        "over a thousand times the theory's 6.6e-07 at 80 s, so these runs cannot test the "
        "theory there. Fast mode runs only a few hundred leases per TTL (as few as 300); the "
        "full run (`fast = False`, or LEASELAB_FAST unset) runs more."
    )


def test_03_a_theory_outside_a_seen_interval_is_named_and_a_consistent_sweep_says_so():
    theory = {(5.0, False): 0.2, (80.0, False): 0.006, (5.0, True): 0.011, (80.0, True): 0.005}
    text = false_expiry_caveat(
        _false_expiry_table(), lambda ttl, beat: theory[(ttl, beat)], fast=False
    )
    assert text == (
        "What these runs can and cannot show: without a heartbeat, the theory is outside the 95% "
        "interval at TTL 5 s (theory 0.2, simulated 0.45)."
    )
    theory[(5.0, False)] = 0.43
    assert false_expiry_caveat(
        _false_expiry_table(), lambda ttl, beat: theory[(ttl, beat)], fast=True
    ).startswith("Every simulated point is consistent with the theory")


def test_05_the_extra_duplicate_charges_with_a_marker_are_its_crashes_after_the_marker():
    """The issue's 63 against 58: the five crashes after the marker insert (a step only a marker
    has) are each retried and charged again."""
    import sim

    runs = {
        name: sim.run(
            "duplicate-delivery",
            seed=1,
            **{"policy.dedup": dedup, "policy.idempotency_key": False, "expect": []},
        )
        for name, dedup in (("no marker, no key", False), ("marker, no key", True))
    }
    assert duplicate_charge_sentence(runs).startswith(
        'Why does "marker, no key" show 63 duplicate charges and "no marker, no key" 58? The '
        "difference, 5, is exactly the difference in crashes (5 against 0): this scenario crashes "
        "consumers right *after the marker insert*"
    )


def test_05_a_difference_the_crashes_do_not_explain_is_said_so():
    from types import SimpleNamespace as Run

    def run(charges, crashes):
        return Run(summary=Run(duplicate_external_effects=charges, crashes=crashes))

    text = duplicate_charge_sentence(
        {"marker, no key": run(63, 5), "no marker, no key": run(60, 0)}
    )
    assert "The runs differ by 3 charges and by 5 crashes after the marker insert" in text


def test_06_the_target_sentence_follows_the_interval():
    """The issue's case: upper end 0.042% below a 0.1% target is 'met',
    not 'needs far more leases'."""
    from types import SimpleNamespace as Row

    met = false_expiry_target_sentence(
        Row(false_expiry_ci_low=0.0, false_expiry_ci_high=0.00042, leases=9100), 1e-3
    )
    assert met == (
        "The interval's upper end, 0.042%, is already below the target of 0.1%: these 9100 "
        "leases show that the target is met (at 95% confidence)."
    )
    open_ = false_expiry_target_sentence(
        Row(false_expiry_ci_low=0.0, false_expiry_ci_high=0.0064, leases=600), 1e-3
    )
    assert open_ == (
        "The interval contains the target of 0.1%: 600 leases can neither confirm nor rule it "
        "out. Without a single false expiry it takes about 3838 leases to show the target is met."
    )
    missed = false_expiry_target_sentence(
        Row(false_expiry_ci_low=0.002, false_expiry_ci_high=0.01, leases=600), 1e-3
    )
    assert missed.startswith("The interval's lower end, 0.2%, is above the target of 0.1%")
    assert leases_to_show(1e-3) == 3838
    assert (
        wilson_interval(0, leases_to_show(1e-3))[1]
        < 1e-3
        < wilson_interval(0, leases_to_show(1e-3) - 1)[1]
    )
