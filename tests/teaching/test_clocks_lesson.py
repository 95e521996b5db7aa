"""Notebook 12's logic (sim.teaching.fencing and .clocks): what a failed lease costs, who checks a
fencing token, the lock-delay's trade, a worker's conservative deadline, clocks that disagree."""

from __future__ import annotations

import pytest

import sim
from sim import teaching
from sim.teaching import cheatsheet, clocks, fencing
from sim.teaching.clocks import deadline_mistakes, safe_deadline


@pytest.fixture(scope="module")
def protections():
    return fencing.protection_runs(fencing.zombie_queue(jobs=300, seed=1), seeds=(1,))


# ---- fencing -------------------------------------------------------------------------------------


def test_a_token_protects_the_store_that_checks_it(protections):
    table = fencing.protection_table(protections)
    alone = table.loc["the lease alone"]
    fenced = table.loc["fenced completion"]
    keyed = table.loc["fenced completion + idempotency key"]
    # the lease alone: zombies ran jobs twice, and both stores applied them twice
    assert alone["jobs run twice"] > 0 and alone["completions refused"] == 0
    assert alone["ledger rows twice"] == alone["charges twice"] > 0
    # fenced: the database refused every zombie completion, ledger row included; the PSP did not
    assert fenced["completions refused"] > 0 and fenced["ledger rows twice"] == 0
    assert fenced["charges twice"] > 0
    # the idempotency key is a token the PSP can check
    assert keyed["charges twice"] == 0 and keyed["ledger rows twice"] == 0
    token = fencing.refused_token(protections["fenced completion"][0])
    assert token["token"] < token["current"] and token["zombie"] != token["holder"]
    assert fencing.refused_token(protections["the lease alone"][0]) is None


def test_jobs_run_twice_counts_psp_calls_under_two_leases(protections):
    run = protections["fenced completion + idempotency key"][0]
    charges = run.events[run.events["kind"] == "psp_charge"]
    replays = charges[charges["detail"] == "replay"]
    assert fencing.ran_twice(run) == replays["job"].nunique() > 0


def test_check_refusers_is_judged_on_the_runs(protections):
    right = teaching.check_refusers({"ledger"}, protections)
    assert right.ok is True and "0 ledger rows" in right.message
    assert teaching.check_refusers("ledger", protections).ok is True
    both = teaching.check_refusers({"ledger", "psp"}, protections)
    assert both.ok is False and "The PSP took" in both.message
    neither = teaching.check_refusers(set(), protections)
    assert neither.ok is False and "rolled back with the refused completion" in neither.message
    assert "not one" in teaching.check_refusers({"database"}, protections).message
    assert teaching.check_refusers(None, protections).ok is None


def test_a_lock_delay_shields_an_unfenced_store_and_delays_every_recovery_by_itself():
    frame = fencing.lock_delay_experiment([0.0, 60.0], jobs=300, seeds=(1, 2))
    none, delayed = frame.iloc[0], frame.iloc[1]
    assert (
        none["ledger_rows_twice"] > 0 and delayed["ledger_rows_twice"] < none["ledger_rows_twice"]
    )
    # a first requeue waits retry_backoff x 1: the mean recovery grows by the delay itself
    slack = (
        none.recovery_ci_high
        - none.recovery_ci_low
        + delayed.recovery_ci_high
        - delayed.recovery_ci_low
    ) / 2
    assert abs((delayed.recovery_mean - none.recovery_mean) - 60.0) <= slack
    sentence = fencing.lock_delay_sentence(frame)
    assert f"{int(none.jobs_run_twice)} jobs ran twice" in sentence
    assert f"{delayed.recovery_mean:.3g} s with 60 s" in sentence


# ---- a worker's own deadline --------------------------------------------------------------------

QUESTION = dict(sent_at=100.0, received_at=100.08, ttl=30.0, drift_ppm=200.0)


def test_the_safe_deadline_counts_from_the_send_and_takes_the_drift_off():
    assert safe_deadline(sent_at=100.0, ttl=30.0, drift_ppm=200.0) == pytest.approx(129.994)
    assert teaching.check_safe_deadline(129.994, **QUESTION).ok is True
    assert teaching.check_safe_deadline("129.9945", **QUESTION).ok is True
    early = teaching.check_safe_deadline(129.99, **QUESTION)
    assert early.ok is False and "is safe, but" in early.message
    late = teaching.check_safe_deadline(129.996, **QUESTION)
    assert late.ok is False and "after the safe deadline" in late.message
    assert teaching.check_safe_deadline("soon", **QUESTION).ok is False
    assert teaching.check_safe_deadline(None, **QUESTION).ok is None


@pytest.mark.parametrize(
    "question",
    [QUESTION, dict(sent_at=0.0, received_at=0.5, ttl=60.0, drift_ppm=50.0)],
)
def test_every_common_slip_of_the_deadline_is_refused_and_named(question):
    for why, value in deadline_mistakes(**question).items():
        verdict = teaching.check_safe_deadline(value, **question)
        assert verdict.ok is False and why in verdict.message, why


def test_renewal_margins_on_a_run():
    run = sim.run(clocks.skewed_queue(jobs=60), **{"policy.clock": "db"})
    margins = clocks.renewal_margins(run, 200.0)
    ttl, rho = run.scenario.policy.lease_ttl, 200e-6
    assert len(margins) >= 60 and set(margins["kind"]) == {"claim", "heartbeat"}
    # counting the full TTL from the reply on a slow clock overstays by ttl x rho / (1 - rho)
    # (to the microsecond a timestamptz keeps)
    assert margins["naive_margin"].to_numpy() == pytest.approx(-ttl * rho / (1 - rho), abs=2e-6)
    # counting ttl x (1 - rho) from the send ends one statement latency early
    assert margins["conservative_margin"].to_numpy() == pytest.approx(0.02, abs=2e-6)
    with pytest.raises(ValueError, match="policy.clock"):
        clocks.renewal_margins(sim.run(clocks.skewed_queue(jobs=20)), 200.0)
    with pytest.raises(ValueError, match="constant statement latency"):
        clocks.renewal_margins(sim.run("baseline", **{"workload.jobs": 20, "horizon": 60.0}), 200.0)


def test_drift_adds_up_with_time():
    assert clocks.drift_seconds(50.0, 86400.0) == pytest.approx(4.32)
    table = clocks.drift_table()
    assert (
        table.loc["50 ppm", "a day"] == "4.32 s" and table.loc["1 ppm", "a 30 s lease"] == "30 µs"
    )


# ---- clocks that disagree ------------------------------------------------------------------------


def test_worker_clocks_that_disagree_let_a_live_lease_be_taken_and_one_clock_does_not():
    frame = clocks.skew_experiment([0.0, 6.0], jobs=150, seeds=(1,)).set_index(
        ["clock_skew", "clock"]
    )
    assert frame.loc[(0.0, "worker"), "double_claims"] == 0
    assert frame.loc[(6.0, "worker"), "double_claims"] > 0
    assert (
        frame.loc[(6.0, "db"), "double_claims"] == 0
        and frame.loc[(6.0, "db"), "false_expiries"] == 0
    )


def test_every_lease_taken_early_went_to_a_clock_ahead_by_more_than_the_slack():
    """The owner renews every h; a worker whose clock is ahead by more than TTL - h - latency sees
    the lease expire before that renewal. Never a pair closer than the slack."""
    for seed in (1, 2, 3):
        run = sim.run(clocks.skewed_queue(jobs=150), seed=seed, **{"faults.clock_skew": 6.0})
        taken = clocks.taken_early(run)
        assert len(taken) == int(run.summary["double_claims"]) > 0
        assert (taken["apart"] > taken["slack"]).all()
        assert taken["slack"].iloc[0] == pytest.approx(10.0 - 3.0 - 0.02)


# ---- the cheat sheet -----------------------------------------------------------------------------


@pytest.mark.parametrize("seed", [1, 2])
def test_the_cheat_sheet_measures_lesson_12s_takeaways(seed):
    proofs = cheatsheet.clocks_and_fencing(seed)
    assert [p.tag for p in proofs] == list(teaching.CLOCKS_TAGS)
    assert [p.tag for p in proofs if not p.holds] == []
    assert all(p.notebook == "12" for p in proofs)
    assert "](12-clocks-and-fencing.ipynb)" in cheatsheet.table(proofs)
    assert cheatsheet.table(proofs).startswith("| the sources say |")
