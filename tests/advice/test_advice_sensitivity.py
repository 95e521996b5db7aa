"""Issue 36, item 1: what the advice rests on, and how it moves when its assumptions move. The
sensitivity table comes from the risk model; here every row is checked against a direct
simulation of A under that row's assumptions (fixed seeds, 99% intervals, a few seconds), its
"advice under it" against a full search with the moved assumption, and the headline's "rests on"
sentence against the causes it names."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from sim.advice import sensitivity
from sim.advice.advisor import advise
from sim.advice.risk import pair_risk, scaled
from sim.advice.sensitivity import FAILOVERS, failover_case, poisson_interval, rests_on, sources
from sim.scenario.dists import Dist
from sim.scenario.settings import from_dict, to_dict
from sim.support.in_words import amount, percent
from sim.sweeps import sweep
from sim.theory.stats import wilson_interval

CANDIDATES = {"ttl": [4, 6, 10], "heartbeat_interval": [1, 2], "watcher_interval": [1]}


def _busy(**assumed):
    """Jobs of about 5 s, 8 workers 70% busy, 80 pauses per worker-hour (median 1 s, p99 8 s)
    unless `assumed` moves them: A (TTL 4 s, heartbeat 1 s) loses about 1% of its leases, enough
    to count in 3000 jobs."""
    rng = np.random.default_rng(8)
    pauses = {"pause_rate": 80, "pause_duration": Dist.lognormal(1.0, 8.0)}
    return advise(
        rng.lognormal(np.log(5.0), 0.5, 2000),
        **(pauses | assumed),
        crash_rate=0,
        workers=8,
        arrival_rate=1.0,
        target_false_expiry=0.2,
        candidates=CANDIDATES,
        verify=False,
    )


@pytest.fixture(scope="module")
def busy_pauses():
    return _busy()


@pytest.fixture(scope="module")
def sample():
    return advise("sample", arrival_rate=1.0, verify=False)


def test_the_table_moves_each_assumption_and_keeps_the_rest(sample):
    table = sample.sensitivity
    a = sample.assumptions
    assert list(table["change"]) == [
        "as assumed",
        "pause rate x0.5: 1 pause per worker-hour",
        "pause rate x2: 4 pauses per worker-hour",
        "pause tail x0.5: median 250 ms, p99 2.5 s",
        "pause tail x2: median 1 s, p99 10 s",
        "one DB failover a day of 10 s",
        "one DB failover a day of 30 s",
    ]
    first = table.iloc[0]
    assert (first["name"], first["a_per_day"], first["a_per_day_high"]) == (
        "A",
        sample.false_expiries_per_day,
        sample.false_expiries_per_day_high,
    )
    # each row is A's risk under exactly that change (the risk model at A's pair)
    busy = sample.inputs["pool"].offered_load(1.0)
    changed = [
        a,
        dataclasses.replace(a, pause_rate=1.0),
        dataclasses.replace(a, pause_rate=4.0),
        dataclasses.replace(a, pause_duration=scaled(a.pause_duration, 0.5)),
        dataclasses.replace(a, pause_duration=scaled(a.pause_duration, 2.0)),
        dataclasses.replace(a, db_stall_rate=1.0, db_stall_duration=Dist.constant(10.0)),
        dataclasses.replace(a, db_stall_rate=1.0, db_stall_duration=Dist.constant(30.0)),
    ]
    for row, moved in zip(table.itertuples(), changed, strict=True):
        expected = pair_risk(
            sample.durations, [(3.0, 1.0)], moved, busy=busy, jobs_per_day=86_400.0
        )[0]
        np.testing.assert_allclose(
            [row.a_false_expiry, row.a_false_expiry_high, row.a_per_day, row.a_per_day_high],
            expected,
            rtol=1e-12,
        )
    # more pauses, longer pauses or a failover cost more; fewer or shorter cost less
    per_day = table["a_per_day"].to_numpy()
    assert per_day[1] < per_day[0] < per_day[2] and per_day[3] < per_day[0] < per_day[4]
    assert (per_day[5:] > per_day[0]).all()
    # a failover longer than what A's lease survives lapses every busy lease: both rows alike
    assert table["a_per_failover"].iloc[5] == pytest.approx(busy, rel=0.01)
    assert table["a_per_failover"].iloc[6] == pytest.approx(busy, rel=0.01)
    assert table["a_per_failover"].iloc[:5].isna().all()


def test_the_advice_under_each_row_is_the_full_search_with_that_assumption(busy_pauses, sample):
    """The table re-chooses over the advice's own candidates, computing only the pairs that can
    matter; a full advise() with the moved assumption chooses the same setting, at the same
    risk."""
    base = busy_pauses.assumptions
    moved = {
        "pause rate x0.5": {"pause_rate": base.pause_rate / 2},
        "pause rate x2": {"pause_rate": base.pause_rate * 2},
        "pause tail x0.5": {"pause_duration": scaled(base.pause_duration, 0.5)},
        "pause tail x2": {"pause_duration": scaled(base.pause_duration, 2.0)},
        "one DB failover a day of 10 s": {"db_stall_rate": 1, "db_stall_duration": 10},
        "one DB failover a day of 30 s": {"db_stall_rate": 1, "db_stall_duration": 30},
    }
    for row in busy_pauses.sensitivity.iloc[1:].itertuples():
        key = next(k for k in moved if row.change.startswith(k))
        full = _busy(**moved[key])
        assert (row.ttl, row.heartbeat_interval, row.watcher_interval) == (
            full.ttl,
            full.heartbeat_interval,
            full.watcher_interval,
        ), row.change
        assert row.per_day == pytest.approx(full.false_expiries_per_day, rel=1e-12)
        assert row.met == full.met
    # and on the sample with the default ladders, where the tail moves the choice
    tail = sample.sensitivity.iloc[4]
    full = advise(
        "sample", arrival_rate=1.0, pause_duration=Dist.lognormal(1.0, 10.0), verify=False
    )
    assert (tail.ttl, tail.heartbeat_interval, tail.watcher_interval) == (
        full.ttl,
        full.heartbeat_interval,
        full.watcher_interval,
    )
    assert tail.per_day == pytest.approx(full.false_expiries_per_day, rel=1e-12)


def test_each_pause_row_is_within_a_direct_simulation_of_it(busy_pauses):
    """A simulated under each row's own pauses (3000 jobs, one run per row, one sweep): the row's
    predicted false expiry per job lies in the simulated 99% Wilson interval. (Heartbeats stay in
    the log: without them a run counts some renewed leases as lapsed.)"""
    rows = [
        (row, v)
        for row, v in zip(
            busy_pauses.sensitivity.itertuples(),
            sensitivity.variants(busy_pauses.assumptions),
            strict=True,
        )
        if not v.failover
    ]
    faults = [_faults(busy_pauses, v.assumptions) for _, v in rows]
    base = busy_pauses.scenario(jobs=3000, seed=3, tail=1.0)  # heartbeats recorded: see below
    runs = sweep(
        base, {"faults": faults}, 1, seed=4, metrics=["jobs", "false_expiries"], progress=False
    ).runs
    for (row, _), run in zip(rows, runs.itertuples(), strict=True):
        jobs, lapsed = int(run.jobs), int(run.false_expiries)
        low, high = wilson_interval(min(lapsed, jobs), jobs, 0.99)
        assert low <= row.a_false_expiry <= high, (row.change, lapsed, jobs, row.a_false_expiry)
        assert lapsed >= 3  # the interval says something: the rows are measured, not bounded


def test_each_failover_row_is_within_a_direct_simulation_of_it(busy_pauses):
    """Failovers of 10 s and 30 s scripted at A (every worker's DB calls hang at once), far enough
    apart for the pool to settle: the leases lost per failover in the row lie in the exact 99%
    Poisson interval of the simulated count."""
    a = busy_pauses.assumptions
    rows = busy_pauses.sensitivity[busy_pauses.sensitivity["a_per_failover"].notna()]
    variants = [v for v in sensitivity.variants(a) if v.failover]
    assert [v.failover for v in variants] == list(FAILOVERS)
    base = busy_pauses.scenario(jobs=2000, seed=5, tail=1.0)
    cases = [failover_case(busy_pauses, v, 2000 / 1.0) for v in variants]
    runs = sweep(
        base,
        {"faults": [case[0] for case in cases]},
        1,
        seed=6,
        metrics=["false_expiries"],
        progress=False,
    ).runs
    for row, (_, predicted, _, failovers), run in zip(
        rows.itertuples(), cases, runs.itertuples(), strict=True
    ):
        assert predicted == pytest.approx(row.a_per_failover, rel=1e-9)
        low, high = (x / failovers for x in poisson_interval(int(run.false_expiries), 0.99))
        assert failovers >= 8 and low <= row.a_per_failover <= high, (row.change, run)


def test_the_headline_says_what_the_answer_rests_on(sample):
    """With a heartbeat the durations only count the pauses a job meets: the sentence names the
    assumption that makes most of A's false expiries, with its share, and what a 30 s failover
    would add, each from the numbers beside it."""
    causes = dict(sources(sample))
    total = sample.false_expiries_per_day
    assert set(causes) == {"pauses", "heartbeat delays"}
    assert sum(causes.values()) == pytest.approx(total, rel=0.01)  # the causes add up
    assert causes["pauses"] > causes["heartbeat delays"]
    sentence = rests_on(sample)
    failover = sample.sensitivity.iloc[-1]
    assert sentence == (
        "rests on the assumed pauses (2 per worker-hour, median 500 ms, p99 5 s): they make "
        f"{percent(causes['pauses'] / total)} of A's {amount(total)} false expiries a day, the "
        "assumed heartbeat statement delay (median 10 ms, p99 200 ms) "
        f"{percent(causes['heartbeat delays'] / total)}; the durations (mean job "
        f"{sample.durations.mean_value():.3g} s) only count how many pauses a job meets; no DB "
        f"failover assumed: one of 30 s a day would add "
        f"{amount(failover['a_per_day'] - total)} ({amount(failover['a_per_failover'])} leases "
        "lapse in each)"
    )
    assert str(sample).splitlines()[1] == "  " + sentence
    # without a heartbeat the durations themselves decide: jobs longer than the TTL
    bare = advise(
        np.r_[np.full(190, 5.0), np.full(10, 40.0)],
        pause_rate=0,
        candidates={"ttl": [30], "heartbeat_interval": [None], "watcher_interval": [5]},
        target_false_expiry=0.5,
        verify=False,
    )
    assert sources(bare) == [
        ("jobs longer than the TTL", pytest.approx(0.05 * 86_400 * bare.inputs["jobs_per_s"]))
    ]
    assert rests_on(bare).startswith(
        "rests on your durations (jobs longer than the TTL): they make 100% of A's "
    )
    quiet = advise(
        np.full(200, 5.0),
        pause_rate=0,
        candidates={"ttl": [30], "heartbeat_interval": [None], "watcher_interval": [5]},
        verify=False,
    )
    assert rests_on(quiet).startswith(
        "rests on: A predicts no false expiry under these assumptions (no stop-the-world pauses; "
        "no DB failover or stall (db_stall_rate 0)); no DB failover assumed: "
    )


def test_the_text_prints_the_table_beside_the_answer(sample):
    text = str(sample).splitlines()
    start = text.index(
        "  if the assumptions move (A's false expiries a day, 95% upper bound; the advice then):"
    )
    assert start == 2  # right under the headline and what it rests on
    rows = text[start + 1 : start + 8]
    assert rows[0] == "    as assumed: A 8.5 a day (upper bound 9.4); advice A, unchanged"
    for line, row in zip(rows, sample.sensitivity.itertuples(), strict=True):
        assert line.startswith(f"    {row.change}: A {amount(row.a_per_day)} a day")
        same = (row.ttl, row.heartbeat_interval, row.watcher_interval) == (
            sample.ttl,
            sample.heartbeat_interval,
            sample.watcher_interval,
        )
        assert ("advice A, unchanged" in line) == same, line


def _faults(advice, a) -> dict:
    moved = dataclasses.replace(advice, inputs={**advice.inputs, "assumptions": a})
    return to_dict(moved.scenario(jobs=1))["faults"]


def test_the_faults_of_a_row_are_the_rows_assumptions(busy_pauses):
    """The runs above simulate what each row says: its pause rate and tail, crashes off."""
    for v in sensitivity.variants(busy_pauses.assumptions):
        if v.failover:
            continue
        faults = from_dict({"faults": _faults(busy_pauses, v.assumptions)}).faults
        assert faults.pause_rate == v.assumptions.pause_rate
        assert faults.pause_duration == v.assumptions.pause_duration
        assert faults.crash_rate == 0
