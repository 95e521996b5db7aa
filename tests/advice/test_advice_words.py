"""Issue 36, item 5: every sentence of the advice is built from the numbers beside it. The words
that judge a number ("within", "over", "faster", "less risk", "contains", "confirmed") are checked
by sim.support.in_words.claim where the sentence is made, and here against the numbers as printed,
over advices on other inputs than the issue's (a heavy tail, milliseconds, DB stalls, a missed
target) and with evidence that agrees and that does not."""

from __future__ import annotations

import dataclasses
import re

import numpy as np
import pytest

from sim import teaching
from sim.advice.advisor import advise
from sim.scenario.dists import Dist
from sim.support.in_words import CONTRADICTION, apart, claim, duration, percent

from .evidence import evidence_at_a

NUMBER = r"(?:< )?[\d.,]+"


def value(text: str) -> float:
    """A printed figure back as a number: '3.72 s', '2 min', '0.011%', '1,200', '< 0.0001%'."""
    text = text.strip()
    if text.startswith("< "):
        return 0.0
    scale = 1.0
    for unit, factor in ((" min", 60.0), (" h", 3600.0), (" ms", 0.001), (" s", 1.0)):
        if text.endswith(unit):
            text, scale = text.removesuffix(unit), factor
            break
    if text.endswith("%"):
        text, scale = text.removesuffix("%"), 0.01
    return float(text.replace(",", "")) * scale


@pytest.fixture(scope="module")
def advices():
    rng = np.random.default_rng(36)
    heavy = (rng.pareto(1.6, 3000) + 1) * 0.8  # a heavy tail: pareto, minimum 0.8 s
    out = {
        "sample": advise("sample", arrival_rate=1.0, verify=False),
        "safety": advise("sample", arrival_rate=1.0, prefer="safety", verify=False),
        "recovery": advise("sample", arrival_rate=1.0, prefer="recovery", verify=False),
        "heavy": advise(heavy, arrival_rate=0.5, workers=8, verify=False),
        "stalls": advise(
            "sample", arrival_rate=1.2, db_stall_rate=3, db_stall_duration=8, verify=False
        ),
        "missed": advise(
            "sample",
            target_false_expiry=1e-7,
            candidates={"ttl": [5, 20], "heartbeat_interval": [1, None], "watcher_interval": [1]},
            verify=False,
        ),
    }
    return out


def check_sentences(text: str) -> int:
    """Every judging word of `text` against the figures printed beside it; the checks made."""
    checks = 0
    for score, word, limit in re.findall(
        rf"its score ({NUMBER} (?:s|min|h)) is (within|over) the ({NUMBER} (?:s|min|h)) limit",
        text,
    ):
        assert (value(score) <= value(limit)) == (word == "within"), (score, word, limit)
        checks += 1
    for theirs, mine, ratio, word in re.findall(
        rf"false expiry ({NUMBER}%) against ({NUMBER}%) \(([\d.e+]+) times (less|more) risk\)",
        text,
    ):
        if value(theirs) != value(mine):
            assert (value(theirs) < value(mine)) == (word == "less"), (theirs, mine, word)
            shown = value(mine) / value(theirs) if word == "less" else value(theirs) / value(mine)
            assert shown == pytest.approx(float(ratio), rel=0.1)
        checks += 1
    for theirs, mine, share, word in re.findall(
        rf"recovery ({NUMBER} (?:s|min|h)) against ({NUMBER} (?:s|min|h)) \(({NUMBER})% "
        r"(slower|faster)\)",
        text,
    ):
        if value(theirs) != value(mine):
            assert (value(theirs) > value(mine)) == (word == "slower"), (theirs, mine, word)
            change = abs(value(theirs) / value(mine) - 1)
            assert 100 * change == pytest.approx(value(share), rel=0.05, abs=0.6)
        checks += 1
    for high, limit in re.findall(
        rf"upper bound ({NUMBER}%) per job \(predicted [^)]*\) is over the target / margin "
        rf"\([^=]*= ({NUMBER}%)\)",
        text,
    ):
        assert value(high) > value(limit), (high, limit)
        checks += 1
    for low, high, word, predicted in re.findall(
        rf"simulated false expiry \[({NUMBER}%), ({NUMBER}%)\] (contains|excludes) the predicted "
        rf"({NUMBER}%)",
        text,
    ):
        inside = value(low) <= value(predicted) <= value(high)
        assert inside == (word == "contains"), (low, high, word, predicted)
        checks += 1
    for high, target in re.findall(
        rf"target confirmed: the simulated false expiry's 95% upper bound, ({NUMBER}%), is within "
        rf"the ({NUMBER}%)",
        text,
    ):
        assert value(high) <= value(target)
        checks += 1
    for low, high, target in re.findall(
        rf"target unconfirmed: the simulated false expiry's 95% interval \[({NUMBER}%), "
        rf"({NUMBER}%)\] reaches above the ({NUMBER}%)",
        text,
    ):
        assert value(low) <= value(target) < value(high)
        checks += 1
    for low, target in re.findall(
        rf"target missed in simulation: the simulated false expiry's 95% interval \[({NUMBER}%), "
        rf"[^\]]*\] lies above the ({NUMBER}%)",
        text,
    ):
        assert value(low) > value(target)
        checks += 1
    for first, rest in re.findall(
        r"they make ([\d.]+)% of [A-E]'s [^,;]*((?:, [^;]*? [\d.]+%)*)", text
    ):
        others = [float(x) for x in re.findall(r" ([\d.]+)%", rest)]
        assert all(float(first) >= x for x in others) and float(first) + sum(others) <= 100.5
        checks += 1
    return checks


@pytest.mark.slow  # advices with their evidence: make test only
def test_every_judging_word_follows_the_printed_figures(advices):
    total = 0
    for name, advice in advices.items():
        text = str(advice)
        made = check_sentences(text)
        assert made >= 1, name  # each advice says something a reader could check
        total += made
    assert total >= 20


@pytest.mark.slow  # advices with their evidence: make test only
@pytest.mark.parametrize(
    "seen, leases, recovery",
    [
        (0, 6000, (3.3, 3.2, 3.4)),  # confirmed, recovery contains
        (1, 4131, (3.6, 3.5, 3.7)),  # unconfirmed, recovery excludes (a finding)
        (40, 6000, (3.1, 3.0, 3.2)),  # missed, recovery excludes on the other side
    ],
)
def test_the_evidence_sentences_follow_their_intervals(advices, seen, leases, recovery):
    advice = dataclasses.replace(advices["sample"])  # the same advice, with this evidence
    advice.evidence = evidence_at_a(
        advice,
        (seen, leases),
        recovery_mean=recovery[0],
        recovery_ci_low=recovery[1],
        recovery_ci_high=recovery[2],
        predicted_recovery_mean=advice.predicted_recovery_mean,
    )
    text = str(advice)
    assert check_sentences(text) >= 4
    for line in (advice.verdict(), advice.target_line(), *advice.findings()):
        assert line in text


def test_a_claim_that_its_figures_contradict_is_a_fault_not_a_sentence():
    assert claim(0.002 <= 0.01, "0.2% is within the 1% target") == "0.2% is within the 1% target"
    with pytest.raises(AssertionError) as caught:
        claim(0.02 <= 0.01, "2% is within the 1% target")
    assert str(caught.value) == f"{CONTRADICTION}: 2% is within the 1% target"
    # the notebooks' claim is the same check, with their own words
    with pytest.raises(AssertionError, match="^the notebook claims, but this run does not show: x"):
        teaching.claim(False, "x")


def test_two_figures_compared_are_written_with_the_digits_that_tell_them_apart():
    assert apart(0.0010004, 0.001) == ("0.10004%", "0.1%")
    assert apart(0.001, 0.001) == ("0.1%", "0.1%")
    assert apart(0.0011, 0.001) == ("0.11%", "0.1%")
    assert apart(2.0004, 2.0, duration, 3) == ("2.0004 s", "2 s")
    assert apart(4.6, 3.72, duration, 3) == ("4.6 s", "3.72 s")
    assert percent(0.0010004) == percent(0.001)  # which is why the sentences need it


@pytest.mark.slow  # advices with their evidence: make test only
def test_a_sentence_judged_on_a_borderline_figure_shows_the_digits(advices):
    """The limit and the score that decide 'within' or 'over' are printed far enough apart to
    be compared by a reader: never the same text for different numbers."""
    for advice in advices.values():
        for score, limit in re.findall(
            rf"its score ({NUMBER} (?:s|min|h)) is (?:within|over) the ({NUMBER} (?:s|min|h))",
            str(advice),
        ):
            if score == limit:
                pytest.fail(f"{score} against {limit}: the same text for a judged pair")


@pytest.mark.slow  # advices with their evidence: make test only
def test_the_heavy_tail_advice_names_its_cause(advices):
    advice = advices["heavy"]
    assert advice.rests_on().startswith("rests on ")
    stalls = advices["stalls"]
    assert "the assumed DB failovers (3 a day, 8 s each)" in stalls.rests_on()
    assert Dist.constant(8.0) == stalls.assumptions.db_stall_duration


def test_a_neighbour_riskier_than_a_risk_free_a_is_said_in_words():
    """Short jobs, no pauses: A predicts no false expiry at all, B some; the comparison is words,
    not a division by zero."""
    rng = np.random.default_rng(3)
    advice = advise(
        rng.exponential(0.05, 1000), pause_rate=0, max_db_load=0.5, arrival_rate=20, verify=False
    )
    assert advice.predicted_false_expiry == 0
    shorter = next(line for line in advice.position if line.startswith("one step shorter"))
    assert shorter.startswith("one step shorter, B (") and "(more risk, where A predicts none)" in (
        shorter
    )
    assert advice.headline().endswith("; no false expiry predicted under these assumptions")
