"""sim.teaching.cheatsheet and .rules_of_thumb, sim.plots.rules: notebook 11's evidence
(issue 15)."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import pandas as pd
import pytest

from sim.plots import ANNOTATION_PT, load_recovery_figure, repeat_recovery_excess
from sim.teaching import cheatsheet, check_watcher_multiples
from sim.teaching.cheatsheet import Proof, load_rule, table, watcher_rule
from sim.teaching.rules_of_thumb import load_recovery, repeat_recovery


@pytest.fixture(scope="module")
def repeat():
    return repeat_recovery((9.0, 10.0, 11.0, 20.0), replications=12, seed=1)


@pytest.fixture(scope="module")
def load():
    return load_recovery((0.1, 0.8), replications=8, jobs=150, seed=1)  # 11's fast-mode sizes


@pytest.mark.slow  # notebook 11's replications: make test only
@pytest.mark.parametrize("seed", [1, 2])
def test_every_statement_of_the_sheet_holds_on_the_fast_runs(seed):
    proofs = (
        cheatsheet.checklist(seed)
        + cheatsheet.confusions(seed)
        + cheatsheet.takeaways(seed, race_replications=2, stall_jobs=300, recovery_replications=12)
    )
    assert [p.tag for p in proofs] == [f"checklist:{i}" for i in range(1, 7)] + [
        "confused:lease-vs-lock",
        "confused:read-then-write-vs-conditional-update",
        "confused:nack-vs-lease",
        "takeaway:1",
        "takeaway:2",
        "takeaway:3",
        "takeaway:4",
    ]
    assert [p.tag for p in proofs if not p.holds] == []
    by_tag = {p.tag: p for p in proofs}
    assert (
        by_tag["checklist:6"].measured
        == "`attempts` = 2 on the row, one per claim in the event log (2 claims)."
    )
    assert by_tag["confused:read-then-write-vs-conditional-update"].measured == (
        "Two workers read the same `Pending` job: 2 of 2 unconditional UPDATEs returned the row "
        "(both think they own it); 1 of 2 conditional ones did."
    )
    assert "0 double claims." in by_tag["checklist:1"].measured


@pytest.mark.slow  # notebook 11's replications: make test only
def test_a_watcher_interval_in_step_with_the_heartbeat_lengthens_the_repeat_recovery(repeat):
    """W = h and W = 2h: the closed form lies below the 95% interval of the second recovery (the
    wait for the next scan takes only W/h values, from W down to h, mean W/2 + h/2 instead of
    W/2); W = 9 and 11 s: the interval contains it."""
    by_w = repeat.set_index("watcher_interval")
    assert list(by_w["multiple"]) == [False, True, False, True]
    assert (by_w["n"] == 12).all()
    for w in (10.0, 20.0):
        assert by_w.loc[w, "ci_low"] > by_w.loc[w, "theory"], by_w.loc[w]
        assert (
            by_w.loc[w, "excess"] > 10.0 / 4
        )  # about h/2 (less the poll wait) over the formula's W/2
    for w in (9.0, 11.0):
        assert by_w.loc[w, "ci_low"] <= by_w.loc[w, "theory"] <= by_w.loc[w, "ci_high"], by_w.loc[w]
    proof = watcher_rule(repeat)
    assert (
        proof.holds and "the formula is below the 95% interval at every multiple" in proof.measured
    )
    assert proof.measured.startswith(
        "Heartbeat every 10 s: at W = 10, 20 s a repeat recovery took on average"
    )


@pytest.mark.slow  # notebook 11's replications: make test only
def test_the_closed_form_holds_at_light_load_and_not_above_it(load):
    light, busy = load.iloc[0], load.iloc[1]
    assert light["mean_ci_low"] <= light["closed_form_mean"] <= light["mean_ci_high"]
    assert busy["closed_form_mean"] < busy["mean_ci_low"]
    assert list(load["mean_inside"]) == [True, False]
    assert busy["closed_form_p95"] > busy["closed_form_mean"]
    assert not busy["p95_ci_low"] <= busy["closed_form_p95"] <= busy["p95_ci_high"]
    proof = load_rule(load)
    assert proof.holds and "the closed form below" in proof.measured
    assert "half of the rule is not shown" not in proof.measured


@pytest.mark.slow  # notebook 11's replications: make test only
def test_the_rule_holds_only_when_both_halves_are_shown(load):
    """Issue 34: the percentile half of the rule was not shown in fast mode, yet the sheet counted
    the rule as supported ("20 of 20")."""
    busy = load.index[-1]
    p95_inside = load.copy()
    p95_inside.loc[busy, ["p95_ci_low", "p95_ci_high"]] = (0.0, 1e3)
    proof = load_rule(p95_inside)
    assert not proof.holds
    assert proof.measured.endswith(
        "The percentile half of the rule is not shown by these runs: the interval holds the "
        "closed form."
    )
    mean_inside = load.copy()
    mean_inside.loc[busy, "mean_inside"] = True
    assert "The mean half of the rule" in load_rule(mean_inside).measured
    others = [Proof("checklist:1", "s", "m", "02", True)] * 19
    assert cheatsheet.support_sentence(others + [load_rule(load)]) == (
        "In this run 20 of 20 statements are supported by their numbers."
    )
    assert cheatsheet.support_sentence(others + [proof]).startswith(
        "In this run 19 of 20 statements are supported by their numbers: not "
        "`rule:simulate-percentiles-and-load`. Small runs"
    )


@pytest.mark.slow  # notebook 11's replications: make test only
def test_a_rule_the_numbers_do_not_support_is_said_in_words(repeat, load):
    flat = repeat.assign(
        excess=0.0, ci_low=repeat["theory"] - 1, ci_high=repeat["theory"] + 1, mean=repeat["theory"]
    )
    proof = watcher_rule(flat)
    assert not proof.holds
    assert "the formula is inside some of their 95% intervals" in proof.measured
    assert "**This run does not show it:**" in proof.row()
    inside = load.assign(
        mean_inside=True, mean_ci_low=0.0, mean_ci_high=1e3, p95_ci_low=0.0, p95_ci_high=1e3
    )
    assert not load_rule(inside).holds


def test_table_rows_and_links():
    proofs = [
        Proof("checklist:1", "says", "measured", "02", True),
        Proof("checklist:2", "s", "m", "03", False),
    ]
    assert table(proofs).splitlines() == [
        "| the article says | the course measured (this run) | shown in |",
        "|---|---|---|",
        "| says | measured | [02](02-read-then-write-race.ipynb) |",
        "| s | **This run does not show it:** m | [03](03-heartbeats-and-zombies.ipynb) |",
    ]
    rule = Proof("rule:x", "r", "m", "11", True)
    assert table([rule]).splitlines()[0].startswith("| rule of thumb |")
    assert table([rule]).splitlines()[-1] == "| r | m | the figure above |"


def test_check_watcher_multiples():
    ask = {"heartbeat_interval": 10.0, "candidates": (15.0, 20.0, 25.0, 30.0)}
    assert check_watcher_multiples(None, **ask).ok is None
    assert check_watcher_multiples({20, 30}, **ask).ok is True
    wrong = check_watcher_multiples({20.0, 25.0}, **ask)
    assert wrong.ok is False and wrong.message == "30 s also divide by 10 s; 25 s do not."
    assert check_watcher_multiples("often", **ask).ok is False


@pytest.mark.slow  # notebook 11's replications: make test only
def test_the_figures(repeat, load):
    ax = repeat_recovery_excess(repeat)
    assert len(ax.containers) == 2  # error bars: multiples and the others
    assert ax.get_legend().get_texts()[0].get_fontsize() >= ANNOTATION_PT >= 9
    assert ax.get_title(loc="left").startswith("Second recovery of a job, heartbeat every 10 s")
    dotted = [line for line in ax.get_lines() if line.get_linestyle() == ":"]
    assert sorted(line.get_xdata()[0] for line in dotted) == [10.0, 20.0]
    plt.close(ax.figure)
    ax = load_recovery_figure(load)
    assert len(ax.containers) == 2
    assert (
        pd.Series([t.get_text() for t in ax.get_legend().get_texts()])
        .str.startswith(("simulated", "closed form"))
        .all()
    )
    plt.close(ax.figure)
