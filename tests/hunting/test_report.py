"""The review report's section "The shortest bad timeline": one part per broken invariant (the
account, the schedule, the timeline figure, the timeline as text), or the certificate."""

from __future__ import annotations

import re

import pytest

import sim

UNFENCED = {"policy.fencing": False}


@pytest.mark.slow  # a review and its report: make test only
def test_the_review_report_shows_the_shortest_bad_timeline(tmp_path):
    hunted = sim.hunt(
        "baseline", schedules=400, invariant="non_owner_completion", postgres=False, **UNFENCED
    )
    review = sim.review("baseline", seeds=[1], variants=False, **UNFENCED)
    page = review.save_report(tmp_path / "review.html", hunt=hunted).read_text()
    section = page[page.index("<h2>The shortest bad timeline</h2>") :]
    finding = hunted.findings["non_owner_completion"]
    assert "<h3>non_owner_completion: a completion by a worker that lost the job</h3>" in section
    assert finding.account.replace("'", "&#x27;") in section
    assert section.count("<svg") == 1  # the timeline, inline
    assert "&lt;&lt;&lt; breaks non_owner_completion" in section  # the text timeline, marked
    assert re.search(r"replay: python -m sim run non_owner_completion\.toml", section)


def test_a_certificate_shows_with_its_scope(tmp_path):
    hunted = sim.hunt(
        "baseline",
        exhaustive=True,
        workers=1,
        jobs=1,
        max_faults=1,
        invariant="non_owner_completion",
        postgres=False,
    )
    page = hunted.save_report(tmp_path / "hunt.html").read_text()
    total = hunted.certificate.total
    assert f"all {total:,} schedules within this scope checked" in page
    assert "up to 1 worker(s) and 1 job(s)" in page and "<svg" not in page
