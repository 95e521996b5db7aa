"""Issue 36, item 4: the advice page a team can put on the screen. Its first screen (checked in
headless Chromium at a laptop's 1366 x 768 and a projector's 1024 x 768) answers what to set, in
the queue's own setting names, what it costs a day, and what it rests on; below it the evidence
and the run that explains the risk (a false expiry and a crash recovery, marked); `--report`
carries the `--as` settings; every cell is escaped."""

from __future__ import annotations

import math
from html.parser import HTMLParser

import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402

from sim.advice.advisor import advise  # noqa: E402
from sim.advice.page import answer  # noqa: E402
from sim.advice.queue_terms import QUEUES, in_queue_terms  # noqa: E402
from sim.advice.shortlist import carried  # noqa: E402
from sim.advice.timeline import explain  # noqa: E402
from sim.cli.main import main  # noqa: E402
from sim.support.in_words import amount, duration  # noqa: E402
from tests.checklist.browser import ensure_chromium, layout  # noqa: E402

pytestmark = pytest.mark.slow  # advice runs, reports and a headless browser: make test only

SCREEN = 768  # a laptop's and a projector's first screen, in CSS pixels
BOXES = ["#set", "#cost", "#assumed", "h1"]


class Text(HTMLParser):
    def __init__(self, html: str):
        super().__init__()
        self.parts: list[str] = []
        self.feed(html)

    def handle_data(self, data):
        self.parts.append(data)

    def __str__(self) -> str:
        return " ".join(" ".join(self.parts).split())


@pytest.fixture(scope="module")
def advice():
    """The issue's sample at 1 job/s, with a small evidence sweep."""
    return advise(
        "sample", arrival_rate=1.0, replications=1, evidence_jobs=200, seed=1, progress=False
    )


@pytest.fixture(scope="module")
def pages(advice, tmp_path_factory):
    folder = tmp_path_factory.mktemp("pages")
    return {
        queue: advice.save_report(folder / f"{queue or 'plain'}.html", settings=queue)
        for queue in (None, "bullmq", "celery-redis")
    }


@pytest.fixture(scope="module")
def chromium() -> str:
    return ensure_chromium()


@pytest.mark.parametrize("width", [1366, 1024])
@pytest.mark.parametrize("queue", [None, "celery-redis"])
def test_the_first_screen_answers_what_to_set_what_it_costs_and_what_it_rests_on(
    advice, pages, chromium, tmp_path, width, queue
):
    """Celery's names are the longest of the twelve queues and it cannot renew, so its page says
    the most on the first screen; it still fits, with no sideways scrolling, at 14 px or more."""
    measured = layout(
        pages[queue], BOXES, tmp_path / "profile", width=width, height=SCREEN, chromium=chromium
    )
    assert measured["scrollWidth"] <= width
    boxes = measured["boxes"]
    for name in BOXES:
        box = boxes[name]
        assert 0 <= box["left"] < box["right"] <= width and box["bottom"] <= SCREEN, (name, box)
        assert box["fontSize"] >= 14
    # side by side at both widths: the three answers read across, not down
    assert boxes["#set"]["top"] == boxes["#cost"]["top"] == boxes["#assumed"]["top"]
    settings = None if queue is None else in_queue_terms(advice, queue)
    said = {name: " ".join(box["text"].split()) for name, box in boxes.items()}
    row = carried(advice, settings)
    if settings is None:
        assert "lease TTL = 3 s" in said["#set"] and "heartbeat = every 1 s" in said["#set"]
    else:
        for s in settings.settings:
            assert f"{s.name} = {s.text}" in said["#set"], s.name
        assert said["#set"].startswith(f"Set {row['name']}, in {settings.label}'s own settings")
    per_day = row["false_expiries_per_day"]
    assert f"{amount(per_day)} false expiries a day" in said["#cost"]
    assert f"up to {amount(365 * per_day)} duplicate PSP calls a year" in said["#cost"]
    assert said["#assumed"].count("rests on") == 1  # the heading says it, the sentence does not
    assert "pauses: 2 stop-the-world pauses per worker-hour" in said["#assumed"]
    assert "no DB failover assumed: one of 30 s a day would add" in said["#assumed"]


def test_the_boxes_say_the_figures_the_text_advice_prints(advice, pages):
    html = pages["bullmq"].read_text(encoding="utf-8")
    text = str(Text(html))
    assert html.count(advice.headline()) == 0  # no run-on sentence, and never twice
    assert text.count("A = TTL 3 s, heartbeat every 1 s, watcher every 0.5 s") == 1  # the title
    for s in in_queue_terms(advice, "bullmq").settings:
        assert f"{s.name} = {s.text}" in text
    for figure in (
        f"{amount(advice.false_expiries_per_day)} false expiries a day (95% upper bound "
        f"{amount(advice.false_expiries_per_day_high)}; {advice.target_text()})",
        f"a crashed job is claimed again after ~{duration(advice.recovery_mean)}",
        f"{amount(advice.db_load)} heartbeat + watcher statements/s",
        advice.rests_on().removeprefix("rests on "),
    ):
        assert figure in text, figure
    for line in advice.text().splitlines()[3:10]:  # the sensitivity rows, in the table
        change = line.strip().split(": A ")[0]
        assert change in text, change
    assert "In BullMQ 6 (PostgreSQL backend)'s own settings" in text  # the full --as lines


def test_a_queue_that_cannot_renew_is_priced_as_the_setting_it_runs(advice, pages):
    """Celery cannot renew a lease, so its visibility timeout runs without a heartbeat: the page
    prices that setting (a named one when it is one), and says what A would have cost."""
    celery = in_queue_terms(advice, "celery-redis")
    row = carried(advice, celery)
    assert math.isnan(row["heartbeat_interval"]) and row["name"] != "A"
    assert row["ttl"] >= advice.inputs["durations_max"]  # it outlasts every observed job
    text = str(Text(pages["celery-redis"].read_text(encoding="utf-8")))
    assert f"What {row['name']} costs, at 1 jobs/s" in text
    assert f"{amount(row['false_expiries_per_day'])} false expiries a day" in text
    assert f"after ~{duration(row['predicted_recovery_mean'])}" in text
    assert (
        f"A (TTL 3 s, heartbeat every 1 s, watcher every 0.5 s) would cost "
        f"{amount(advice.false_expiries_per_day)} a day" in text
    )
    assert "in Celery on Redis's own settings: task_acks_late = True" in advice.text(celery)


def test_the_setting_each_queue_runs_is_what_its_translation_sets(advice):
    """carried() against sim.advice.queue_terms: the TTL of the setting a queue runs is among the
    values its translation sets (in seconds, rounded up, or in ms); a queue whose lease is a
    mechanism of its own is priced only in its own lines."""
    for queue in QUEUES:
        settings = in_queue_terms(advice, queue)
        values = {
            float(s.value)
            for s in settings.settings
            if isinstance(s.value, int | float) and not isinstance(s.value, bool)
        }
        row = carried(advice, settings)
        if row is None:
            continue
        ttl = float(row["ttl"])
        assert values & {ttl, float(math.ceil(ttl)), ttl * 1000}, (queue, ttl, values)
        if queue == "bullmq":  # A's TTL, heartbeat and watcher, each by its own name
            assert row["name"] == "A", queue


def test_less_than_is_escaped_in_every_cell(tmp_path):
    """Rare pauses and a long lease: A risks below one in a million per job, and its
    '< 0.0001%' in a table cell must reach the page as text."""
    quiet = advise(
        "sample",
        arrival_rate=1.0,
        pause_rate=0.01,
        candidates={"ttl": [30, 60], "heartbeat_interval": [5], "watcher_interval": [1]},
        verify=False,
    )
    assert 0 < quiet.predicted_false_expiry < 1e-6
    html = quiet.save_report(tmp_path / "quiet.html").read_text(encoding="utf-8")
    assert "&lt; 0.0001%" in html and "< 0.0001%" not in html
    assert "< 0.0001%" in str(Text(html))


def test_the_run_that_explains_the_risk_shows_a_false_expiry_and_a_crash_recovery(advice):
    """A short run of A with one scripted pause longer than what A's lease survives, on a worker
    holding a job, and one crash of another job holder: the lease of the paused worker expires
    under it (a false expiry), another worker takes the job, and the crashed job is claimed again
    the predicted way."""
    story = explain(advice, seed=2)
    run = story.run
    leases = run.leases
    assert run.summary["crashes"] == 1 and run.summary["false_expiries"] >= 1
    assert story.pause > story.slack == pytest.approx(3.0 - 1.0 - 0.002)
    paused = leases[
        (leases["worker"] == f"w{story.pause_worker}")
        & (leases["start"] < story.pause_at)
        & (leases["end"] > story.pause_at)
    ]
    assert len(paused) == 1
    lost = paused.iloc[0]
    # the lease ran out while its owner was frozen (its last renewal was before the pause)
    assert lost["end_reason"] == "expired" and bool(lost["false_expiry"])
    assert story.pause_at < lost["until"] <= story.pause_at + advice.ttl
    assert lost["until"] < story.pause_at + story.pause
    again = leases[(leases["job"] == lost["job"]) & (leases["start"] > lost["start"])]
    assert len(again) and again["worker"].iloc[0] != lost["worker"]  # taken while it was paused
    assert again["start"].iloc[0] < story.pause_at + story.pause
    recovered = run.recoveries
    assert len(recovered) == 1
    assert recovered["crash_at"].iloc[0] == pytest.approx(story.crash_at)
    assert recovered["latency"].iloc[0] == pytest.approx(story.recovery)
    # the crash waits out the lease left, the watcher and a poll: under TTL + watcher + poll
    assert 0 < story.recovery < advice.ttl + advice.watcher_interval + 1.0 + 0.1
    caption = story.caption()
    assert f"freezes for {duration(story.pause)}" in caption
    assert f"claimed again {duration(story.recovery)} later" in caption


def test_the_page_marks_the_false_expiry_and_the_recovery_on_its_timeline(advice, pages):
    html = pages[None].read_text(encoding="utf-8")
    story = explain(advice, seed=int(advice.inputs["seed"]) + 1)
    assert "How a lease is lost, and a crash recovered" in html
    assert html.count('id="story') == 2  # the two annotations, inline in the SVG
    assert story.caption().replace("'", "&#x27;") in html


def test_report_carries_the_as_settings_from_the_command_line(tmp_path, capsys):
    page = tmp_path / "advice.html"
    argv = ["advise", "sample", "--arrival-rate", "1", "--no-verify", "--as", "bullmq"]
    assert main([*argv, "--report", str(page)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[1] == (
        "  A in BullMQ 6 (PostgreSQL backend)'s own settings: lockDuration = 3000 ms, "
        "lockRenewTime = 1000 ms, stalledInterval = 500 ms, maxStalledCount = 1"
    )
    text = str(Text(page.read_text(encoding="utf-8")))
    assert "Set A, in BullMQ 6 (PostgreSQL backend)'s own settings" in text
    assert "lockDuration = 3000 ms" in text and "lockRenewTime = 1000 ms" in text
    assert "rules of thumb: heartbeat at most half the TTL: holds" in text


def test_every_queues_first_screen_names_its_settings(advice):
    """The boxes for each of the twelve queues: its settings by name and value, and the costs of
    the setting it carries (A's, marked as A's, when it runs a mechanism of its own)."""
    for queue in QUEUES:
        settings = in_queue_terms(advice, queue)
        text = str(Text(answer(advice, settings)))
        assert f"in {settings.label}'s own settings" in text
        assert all(f"{s.name} = {s.text}" in text for s in settings.settings), queue
        row = carried(advice, settings)
        costed = "A" if row is None else row["name"]
        assert f"What {costed} costs, at 1 jobs/s" in text, queue
        if row is None:
            assert f"{settings.label} runs a mechanism of its own" in text


def test_the_evidence_simulates_the_named_settings_and_quotes_their_figures(advice, pages):
    """Issue 36, item 2: the evidence row "B" is the setting the table calls B (its own heartbeat
    and watcher), and its predicted false expiry is the table's figure for B, not another
    setting's at the same TTL."""
    evidence = advice.evidence.set_index("name")
    named = advice.shortlist.set_index("name")
    assert list(evidence.index) == ["B", "A", "C"]  # the settings one TTL step apart, by TTL
    for name, row in evidence.iterrows():
        setting = named.loc[name]
        assert (row["ttl"], row["watcher_interval"]) == (
            setting["ttl"],
            setting["watcher_interval"],
        )
        assert row["heartbeat_interval"] == setting["heartbeat_interval"]
        assert row["predicted_false_expiry"] == pytest.approx(
            setting["predicted_false_expiry"], rel=1e-12
        )
    text = str(Text(pages[None].read_text(encoding="utf-8")))
    assert "B: TTL 2 s, heartbeat every 0.5 s, watcher every 1 s" in text
    assert (evidence.loc["B", "watcher_interval"], advice.watcher_interval) == (1.0, 0.5)
