"""Notebook 13's helpers (sim.teaching.hunting): the noisy failure still breaks, the shrinker's
table goes down, and the exercise accepts the shortest pause and names the common mistakes."""

from __future__ import annotations

import pytest

import sim
from sim import teaching
from sim.hunting.runner import execute
from sim.teaching.hunting import shortest_pause


@pytest.fixture(scope="module")
def zombie():
    return sim.hunt(
        "baseline",
        schedules=400,
        invariant="non_owner_completion",
        postgres=False,
        **{"policy.fencing": False},
    )


def test_the_noisy_failure_breaks_and_shrinks_to_its_essentials(zombie):
    scope, noisy = teaching.noisy_failure(zombie, "non_owner_completion")
    assert "non_owner_completion" in execute(scope, noisy).broken
    assert len(noisy.faults) > len(zombie.findings["non_owner_completion"].schedule.faults)
    table = teaching.shrink_table(scope, noisy, "non_owner_completion")
    assert table.iloc[0]["step"] == "as found, with the noise"
    assert table["faults"].iloc[-1] == 1 and table["faults"].is_monotonic_decreasing
    assert table["records"].iloc[-1] < table["records"].iloc[0]


def test_the_shortest_pause_is_from_its_start_to_the_other_worker_s_claim(zombie):
    finding = zombie.findings["non_owner_completion"]
    (pause,) = finding.schedule.faults
    other = f"w{1 - pause.worker}"
    claims = [s.t for s in finding.steps if s.kind == "claim" and s.worker == other]
    assert shortest_pause(finding) == pytest.approx(claims[-1] - pause.at)
    assert pause.at + shortest_pause(finding) < finding.steps[-1].t  # w0 completes after it


def test_the_exercise_accepts_the_answer_and_names_the_mistakes(zombie):
    finding = zombie.findings["non_owner_completion"]
    truth = shortest_pause(finding)
    assert teaching.check_shortest_pause(None, finding).ok is None
    assert teaching.check_shortest_pause(round(truth, 3), finding).ok is True
    ttl = teaching.check_shortest_pause(30, finding)
    assert ttl.ok is False and "is the TTL" in ttl.message
    assert teaching.check_shortest_pause(60, finding).ok is False
    assert "not one" in teaching.check_shortest_pause("long", finding).message
