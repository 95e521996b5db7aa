"""Issue 22: the advice shows its trade-off (neighbours' risk and recovery side by side, --prefer
with the rule stated), judges feasibility on the 95% upper bound, takes a per-day target, and says
what its evidence shows (agrees or not, target confirmed or not, the simulated recovery as the
answer when the closed form misses). Every printed sentence is checked against its figures."""

from __future__ import annotations

import copy
import re
import warnings

import numpy as np
import pandas as pd
import pytest

from sim.advice.advisor import advise, infeasible_reasons
from sim.advice.evidence import leases_to_confirm
from sim.advice.shortlist import setting_words
from sim.cli.main import main
from sim.errors import ConfigError
from sim.scenario.settings import LeaseWarning
from sim.support.in_words import duration, percent
from sim.theory import closed_forms
from sim.theory.stats import pooled_mean_ci, wilson_interval

from .evidence import evidence_at_a

RULES = {"recovery": 0.0, "balanced": 1.0, "safety": 10.0}


@pytest.fixture(scope="module")
def by_preference():
    return {p: advise("sample", arrival_rate=1.0, prefer=p, verify=False) for p in RULES}


def test_each_preference_follows_its_stated_rule(by_preference):
    for prefer, w in RULES.items():
        advice = by_preference[prefer]
        table = advice.candidates
        np.testing.assert_allclose(
            table["score"],
            table["predicted_recovery_mean"]
            * (1 + w * table["predicted_false_expiry_high"] / 0.001),
        )
        pool = table[table["feasible"]]
        near = pool[pool["score"] <= pool["score"].min() * 1.1 + 1e-9]
        assert advice.db_load == pytest.approx(near["db_load"].min())
        score = (
            "score = predicted recovery"
            if w == 0
            else f"score = predicted recovery x (1 + {w:g} x false-expiry upper bound / target)"
        )
        best = pool.loc[pool["score"].idxmin()]
        assert advice.tradeoff_lines()[0] == (
            f"the settings compared (prefer {prefer}: {score}; the cheapest in DB load within 10% "
            "of the lowest score among the feasible); each one's role:"
        )
        # the lowest score is a named setting, and its row says so
        named = advice.shortlist.set_index("name")
        parts = named["role"].str.split("; also ")
        lowest = named[parts.apply(lambda roles: "the lowest score" in roles)]
        assert len(lowest) == 1 and lowest["score"].iloc[0] == best["score"]


def test_safety_buys_less_risk_with_slower_recovery(by_preference):
    """On the sample at 1 job/s: recovery picks TTL 2 s, balanced 3 s, safety 5 s."""
    r, b, s = (by_preference[p] for p in ("recovery", "balanced", "safety"))
    assert (r.ttl, b.ttl, s.ttl) == (2.0, 3.0, 5.0)
    assert (
        r.predicted_false_expiry_high
        > b.predicted_false_expiry_high
        > s.predicted_false_expiry_high
    )
    assert r.predicted_recovery_mean < b.predicted_recovery_mean < s.predicted_recovery_mean


def _parse_named(line: str) -> dict:
    m = re.fullmatch(
        r" (?P<mark>[* ]) (?P<name>[A-E]) TTL (?P<ttl>[\d.]+ (s|min)), (?P<beat>no heartbeat|"
        r"heartbeat every [\d.]+ s), watcher every (?P<w>[\d.]+ s): false expiry (?P<fe>[\d.]+%) "
        r"\(upper bound (?P<high>[\d.]+%)\), (?P<day>[\d.,]+) a day; recovery (?P<rec>[\d.]+ s); "
        r"(?P<load>[\d.,]+) statements/s; (?P<score>score [\d.]+ s|not feasible); (?P<role>.+)",
        line,
    )
    assert m, line
    return m.groupdict()


def test_the_named_settings_lines_carry_the_candidates_figures(by_preference):
    """The issue's sample: one table of named settings, A the recommendation, B and C the rule's
    choice one TTL step either side, D the lowest score, E the best without a heartbeat; each
    line's numbers those of the candidate table's row for that setting, each name used once."""
    advice = by_preference["balanced"]
    lines = advice.tradeoff_lines()[1:]
    assert len(lines) == len(advice.shortlist) == 5
    table = advice.candidates
    for line, (_, same) in zip(lines, advice.shortlist.iterrows(), strict=True):
        got = _parse_named(line)
        h = same["heartbeat_interval"]
        hb = table["heartbeat_interval"]
        found = table[
            (table["ttl"] == same["ttl"])
            & (hb.isna() if pd.isna(h) else hb == h)
            & (table["watcher_interval"] == same["watcher_interval"])
        ]
        if same["name"] != "E":  # E, a queue's timeout, may lie between the TTLs searched
            assert len(found) == 1
            pd.testing.assert_series_equal(
                found.iloc[0][table.columns], same[table.columns], check_names=False
            )
        assert got["name"] == same["name"] and got["mark"] == ("*" if same["name"] == "A" else " ")
        assert got["ttl"] == duration(same["ttl"]) and got["w"] == duration(
            same["watcher_interval"]
        )
        assert got["fe"] == percent(same["predicted_false_expiry"])
        assert got["high"] == percent(same["predicted_false_expiry_high"])
        assert got["day"] == f"{same['false_expiries_per_day']:.2g}"
        assert got["rec"] == duration(same["predicted_recovery_mean"])
        assert got["score"] == (
            f"score {duration(same['score'])}" if same["feasible"] else "not feasible"
        )
        assert got["role"] == same["role"]
    named = advice.shortlist.set_index("name")
    assert list(named["step"][:3]) == ["chosen", "shorter", "longer"]
    assert list(named["ttl"][:3]) == [3.0, 2.0, 4.0]
    assert named.loc["B", "role"] == (
        "one TTL step shorter (TTL 2 s): the cheapest in DB load within 10% of the lowest score "
        "among the feasible with that TTL"
    )
    assert named.loc["D", "role"] == "the lowest score" and named.loc["D", "ttl"] == 2.0
    assert np.isnan(named.loc["E", "heartbeat_interval"]) and not named.loc["E", "feasible"]
    # one name per setting: no setting appears twice
    keys = advice.shortlist[["ttl", "heartbeat_interval", "watcher_interval"]].fillna(-1)
    assert not keys.duplicated().any()


def test_feasibility_is_judged_on_the_upper_bound_not_the_point():
    """No heartbeat, TTL 10 min: no job of the sample took longer, so the point risk is 0, under
    target / margin; but 2000 jobs bound the share longer than it at 0.15%: not feasible, and why
    says so with both figures."""
    advice = advise(
        "sample",
        candidates={"ttl": [600], "heartbeat_interval": [None], "watcher_interval": [10]},
        verify=False,
    )
    row = advice.candidates.iloc[0]
    assert row["predicted_false_expiry"] < 1e-12 and not row["feasible"] and not advice.met
    assert infeasible_reasons(row, advice) == [
        f"its false-expiry upper bound {percent(row['predicted_false_expiry_high'])} per job "
        "(predicted < 0.0001%) is over the target / margin (0.1% / 2 = 0.05%)"
    ]
    assert percent(row["predicted_false_expiry_high"]) == "0.15%"


def test_a_per_day_target_is_the_per_job_target_at_the_arrival_rate():
    per_day = advise("sample", arrival_rate=1.0, target_per_day=20, verify=False)
    per_job = advise("sample", arrival_rate=1.0, target_false_expiry=20 / 86_400, verify=False)
    assert per_day.target_false_expiry == pytest.approx(20 / 86_400)
    pd.testing.assert_frame_equal(per_day.candidates, per_job.candidates)
    assert (per_day.ttl, per_day.heartbeat_interval) == (per_job.ttl, per_job.heartbeat_interval)
    assert "; target 20 a day = 0.023% per job at 1 jobs/s)" in per_day.headline()
    assert per_day.false_expiries_per_day_high <= 20 / 2  # feasible: upper bound within target / 2


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (
            {"target_per_day": 5, "target_false_expiry": 0.001, "arrival_rate": 1},
            "target_per_day: give a target per job (target_false_expiry) or per day, not both",
        ),
        ({"target_per_day": 5}, "target_per_day: needs arrival_rate (jobs/s)"),
        (
            {"target_per_day": 100_000, "arrival_rate": 1},
            "target_per_day: 100000 a day is not below the 86,400 jobs a day at 1 jobs/s",
        ),
        ({"target_per_day": 0, "arrival_rate": 1}, "target_per_day: must be a number > 0"),
        ({"prefer": "speed"}, "prefer: 'speed' is not one of recovery, balanced, safety"),
    ],
)
def test_bad_target_or_preference_is_one_line(kwargs, message):
    with pytest.raises(ConfigError) as caught:
        advise("sample", verify=False, **kwargs)
    assert str(caught.value).startswith(message) and "\n" not in str(caught.value)


def test_the_command_line_takes_the_new_flags(capsys):
    argv = ["advise", "sample", "--no-verify", "--arrival-rate", "1", "--target-per-day", "20"]
    assert main([*argv, "--prefer", "safety"]) == 0
    out = capsys.readouterr().out
    assert "; target 20 a day = 0.023% per job at 1 jobs/s)" in out and "(prefer safety: " in out
    assert main(["advise", "sample", "--prefer", "fast"]) == 2
    assert "argument --prefer: invalid choice: 'fast'" in capsys.readouterr().err


# ---- what the evidence says ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def unverified_once():
    return advise("sample", arrival_rate=1.0, verify=False)


@pytest.fixture
def unverified(unverified_once):
    """A copy of the module's advice for each test, which sets its evidence."""
    return copy.deepcopy(unverified_once)


def test_when_the_evidence_contains_the_prediction_the_advice_gives_the_prediction(unverified):
    advice = unverified
    advice.evidence = evidence_at_a(advice)
    row = advice.evidence.iloc[0]
    assert advice.recovery_source == "predicted" and advice.findings() == []
    assert advice.recovery_mean == advice.predicted_recovery_mean
    assert advice.verdict() == (
        "evidence agrees with the prediction: at A the simulated false expiry "
        f"[{percent(row.false_expiry_ci_low)}, {percent(row.false_expiry_ci_high)}] contains the "
        f"predicted {percent(row.predicted_false_expiry)}, and the simulated recovery "
        f"[{duration(row.recovery_ci_low)}, {duration(row.recovery_ci_high)}] contains the "
        f"predicted {duration(row.predicted_recovery_mean)} at the 20.8 crashes per worker-hour "
        "simulated"
    )
    assert "(simulated)" not in advice.headline()


def test_when_the_evidence_excludes_the_prediction_the_simulated_figure_is_the_answer(unverified):
    """The simulated mean 3.5 s [3.4, 3.6] at 20.8 crashes per worker-hour excludes the closed
    form's figure at that rate (predicted + 0.02 s); the advice gives 3.5 s moved to the assumed
    1 crash per worker-hour by the closed form's difference (-0.02 s): 3.48 s."""
    advice = unverified
    advice.evidence = evidence_at_a(
        advice, recovery_mean=3.5, recovery_ci_low=3.4, recovery_ci_high=3.6
    )
    shift = -0.02
    assert advice.recovery_source == "simulated"
    assert advice.recovery_mean == pytest.approx(3.5 + shift)
    assert f"recovery ~ {duration(3.5 + shift)} (simulated)," in advice.headline()
    assert advice.verdict().startswith("evidence disagrees with the prediction on recovery: ")
    predicted = duration(advice.predicted_recovery_mean + 0.02)
    assert advice.findings() == [
        f"finding: at A the closed form's recovery, {predicted}, is below the simulated 95% "
        "interval [3.4 s, 3.6 s] (mean 3.5 s over 80 crashes at 20.8 crashes per worker-hour); "
        f"the advice gives the simulated figure, {duration(3.5 + shift)}, moved to your 1 crash "
        "per worker-hour by the closed form's difference (-0.02 s). The closed form: it takes "
        "the busy workers' remaining work as independent, while long jobs tend to keep them busy "
        "together, so under load it runs low"
    ]
    text = str(advice)
    assert advice.findings()[0] in text and "mean 3.48 s (simulated, see the finding)" in text


def test_too_few_crashes_give_no_interval_and_say_so(unverified):
    advice = unverified
    advice.evidence = evidence_at_a(
        advice, recoveries=7, recovery_ci_low=np.nan, recovery_ci_high=np.nan
    )
    assert advice.recovery_source == "predicted"
    assert advice.verdict().endswith("and there were too few crashes (7) for a recovery interval")
    assert "(too few crashes for an interval) over 7 crashes" in str(advice)


@pytest.mark.parametrize(
    "seen, leases, verdict",
    [(0, 6080, "confirmed"), (1, 4131, "unconfirmed"), (30, 6000, "missed in simulation")],
)
def test_the_target_is_confirmed_only_when_the_simulated_upper_bound_is_within_it(
    unverified, seen, leases, verdict
):
    """The issue's case is the middle one: 1 false expiry in 4131 leases, 95% interval
    [0.0043%, 0.14%], reaches above the 0.1% target: unconfirmed, with the leases that would do."""
    advice = unverified
    low, high = wilson_interval(seen, leases)
    advice.evidence = evidence_at_a(advice, (seen, leases))
    line = advice.target_line()
    assert line.startswith(f"target {verdict}: ")
    interval = f"[{percent(low)}, {percent(high)}]"
    if verdict == "confirmed":
        assert line == (
            f"target confirmed: the simulated false expiry's 95% upper bound, {percent(high)}, is "
            f"within the 0.1% target ({leases} leases)"
        )
    elif verdict == "missed in simulation":
        assert line == (
            f"target missed in simulation: the simulated false expiry's 95% interval {interval} "
            "lies above the 0.1% target"
        )
    else:
        assert interval == "[0.0043%, 0.14%]"
        need = leases_to_confirm(advice.predicted_false_expiry, 0.001)
        runs = int(np.ceil(need / (leases / 4)))
        assert line == (
            f"target unconfirmed: the simulated false expiry's 95% interval {interval} reaches "
            f"above the 0.1% target ({leases} leases); at the predicted "
            f"{percent(advice.predicted_false_expiry)} about {need:,} leases would confirm it, "
            f"{runs} runs like these (replications)"
        )
        p = advice.predicted_false_expiry
        assert (
            wilson_interval(p * need, need)[1]
            <= 0.001
            < wilson_interval(p * (need - 1), need - 1)[1]
        )


def test_pooled_recovery_intervals_never_go_below_zero():
    """06 in fast mode printed [-0.197 s, 4.83 s] from a t interval over 2 runs; pooling the
    crashes gives an interval over all of them, and too few values give none."""
    rng = np.random.default_rng(4)
    runs = [rng.exponential(2.0, n) for n in (37, 41)]
    mean, low, high, n = pooled_mean_ci(
        [len(r) for r in runs], [r.mean() for r in runs], [r.std(ddof=1) for r in runs]
    )
    values = np.concatenate(runs)
    assert n == 78 and mean == pytest.approx(values.mean())
    half = 1.991 * values.std(ddof=1) / np.sqrt(78)
    assert (low, high) == pytest.approx((mean - half, mean + half), rel=1e-3) and low > 0
    assert np.isnan(pooled_mean_ci([4, 5], [2.0, 2.5], [0.5, 0.4])[1])  # 9 values: too few
    skewed = pooled_mean_ci([6, 6], [0.5, 30.0], [1.0, 60.0])  # the t interval would reach below 0
    assert skewed[3] == 12 and np.isnan(skewed[1]) and np.isnan(skewed[2])


def test_a_fast_evidence_sweep_of_two_runs_gives_a_non_negative_interval():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LeaseWarning)
        advice = advise(
            "sample", arrival_rate=1.0, replications=2, evidence_jobs=300, seed=1, progress=False
        )
    for row in advice.evidence.itertuples():
        assert row.runs == 2
        if np.isfinite(row.recovery_ci_low):
            assert 0 < row.recovery_ci_low <= row.recovery_mean <= row.recovery_ci_high
        else:
            assert row.recoveries < 10 or row.recovery_mean > 0
    assert "[-" not in str(advice)


def test_the_counts_tell_meeting_the_target_from_being_feasible(by_preference):
    """Notebook 06 called the feasible set the ones that "meet the target"; the stricter set is
    feasible (within target / margin, and a TTL of at least 2 heartbeat intervals)."""
    advice = by_preference["balanced"]
    table = advice.candidates
    met = int((table["predicted_false_expiry_high"] <= 0.001).sum())
    feasible = int(table["feasible"].sum())
    assert met > feasible > 0
    assert advice.counts_line() == (
        f"chosen from {len(table)} candidates: {met} meet the target (95% upper bound within "
        f"0.1%), {feasible} are feasible (upper bound within target / margin 2, TTL at least 2 "
        "heartbeat intervals)"
    )


def test_the_heartbeat_is_priced_at_the_arrival_rate_not_at_full_load(by_preference):
    """Notebook 06 gave the heartbeat traffic at 1 job/s and called it full load (the 4 workers
    carry 1.78 jobs/s): the line now names the rate its figure is at."""
    advice = by_preference["balanced"]
    line = advice.heartbeat_line()
    h = advice.heartbeat_interval
    assert line.endswith(
        f"with a heartbeat every {duration(h)} the TTL only has to outlast the gap between "
        f"renewals: {duration(advice.ttl)}, recovering in about {duration(advice.recovery_mean)}, "
        f"for {advice.heartbeat_load:.2g} heartbeat statements/s at 1 jobs/s"
    )
    at_capacity = closed_forms.heartbeat_load(
        heartbeat_interval=h,
        arrival_rate=advice.inputs["pool"].capacity,
        job_duration=advice.durations,
        latency=0.002,
    )
    assert advice.heartbeat_load == pytest.approx(at_capacity / advice.inputs["pool"].capacity)
    bare = advice.shortlist[advice.shortlist["heartbeat_interval"].isna()].iloc[0]
    assert bare["name"] == "E" and bare["ttl"] >= advice.inputs["durations_max"]
    assert line.startswith(
        "without a heartbeat no TTL searched is feasible: the lowest false-expiry upper bound any "
        "reaches is 0.15% per job, over target / margin (0.05%); E (TTL "
        f"{duration(bare['ttl'])}, no heartbeat, watcher every 0.5 s), the shortest TTL near it, "
        f"has {percent(bare['predicted_false_expiry_high'])} (predicted "
        f"{percent(bare['predicted_false_expiry'])}: 2000 observed jobs cannot show a smaller "
        "share outlasting the TTL); "
    ), line


@pytest.mark.slow
def test_the_bimodal_export_gets_an_answer_whose_sentences_follow_its_figures(bimodal_csv):
    """Our bimodal file at 0.45 jobs/s (75% of what 4 workers carry): the evidence runs at the
    advice's own load (crashes add at most 5 points of it), and every evidence line, the verdict
    and the recovery figure the advice gives follow the evidence table."""
    advice = advise(
        bimodal_csv,
        column="duration_ms",
        unit="ms",
        arrival_rate=0.45,
        replications=3,
        seed=2,
        progress=False,
    )
    assert advice.met and advice.predicted_false_expiry_high <= 0.001 / 2
    assert advice.utilisation == pytest.approx(0.753, abs=0.001)
    evidence = advice.evidence
    assert (evidence["utilisation"] <= advice.utilisation + 0.05 + 1e-9).all()
    assert (evidence["utilisation"] > advice.utilisation).all()  # the raised crash rate
    text = str(advice)
    for row in evidence.itertuples():
        assert (
            f"{row.name} {setting_words(row.ttl, row.heartbeat_interval, row.watcher_interval)}: "
            f"false expiry {percent(row.false_expiry)} "
            f"[{percent(row.false_expiry_ci_low)}, {percent(row.false_expiry_ci_high)}] of "
            f"{row.leases} leases (predicted {percent(row.predicted_false_expiry)}); recovery "
            f"{duration(row.recovery_mean)} [{duration(row.recovery_ci_low)}, "
            f"{duration(row.recovery_ci_high)}] over {row.recoveries} crashes" in text
        )
        assert 0 < row.recovery_ci_low <= row.recovery_mean <= row.recovery_ci_high
    row = evidence[evidence["recommended"]].iloc[0]
    inside = row.recovery_ci_low <= row.predicted_recovery_mean <= row.recovery_ci_high
    rec_words = advice.verdict().split("the simulated recovery ")[1]
    assert ("excludes the predicted" in rec_words) == (not inside)
    assert advice.recovery_source == ("predicted" if inside else "simulated")
    assert (advice.findings() == []) == inside
    target = advice.target_line()
    if row.false_expiry_ci_high <= 0.001:
        assert target.startswith(
            f"target confirmed: the simulated false expiry's 95% upper bound, "
            f"{percent(row.false_expiry_ci_high)}"
        )
    else:
        assert target.startswith("target unconfirmed") or target.startswith("target missed")


def test_amounts_read_as_counts_and_rates():
    from sim.support.in_words import amount

    assert [amount(x) for x in (0, 4e-4, 0.4213, 1.74, 230.4, 1234.5, float("nan"))] == [
        "0",
        "< 0.001",
        "0.42",
        "1.7",
        "230",
        "1,234",
        "n/a",
    ]
