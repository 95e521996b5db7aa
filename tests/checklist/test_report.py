"""The HTML report: one self-contained file (parsed here: sections, verdicts, inline figures,
nothing fetched, print CSS) that a real browser renders (headless Chromium screenshot, pixels
checked)."""

from __future__ import annotations

from html.parser import HTMLParser
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.image  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

import sim  # noqa: E402
from sim.advice.advisor import advise  # noqa: E402
from sim.advice.shortlist import setting_words  # noqa: E402
from sim.checklist.design_review import STATUS_STYLE, review  # noqa: E402
from sim.cli.main import main  # noqa: E402

from .browser import ensure_chromium, screenshot  # noqa: E402

pytestmark = pytest.mark.slow  # advice runs, reports and a headless browser: make test only


class Page(HTMLParser):
    """Tags, attributes and text of a page, with the sections (h2) and the verdict badges."""

    def __init__(self, text: str):
        super().__init__()
        self.tags: list[tuple[str, dict]] = []
        self.h2: list[str] = []
        self.badges: list[str] = []
        self.text: list[str] = []
        self.style = ""
        self._open: list[str] = []
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.tags.append((tag, attrs))
        self._open.append(
            tag if tag != "span" or "badge" not in (attrs.get("class") or "") else "badge"
        )

    def handle_endtag(self, tag):
        if self._open:
            self._open.pop()

    def handle_data(self, data):
        where = self._open[-1] if self._open else ""
        if where == "h2":
            self.h2.append(data.strip())
        elif where == "badge":
            self.badges.append(data.strip())
        elif where == "style":
            self.style += data
        self.text.append(data)

    def count(self, tag: str) -> int:
        return sum(1 for t, _ in self.tags if t == tag)

    def fetches(self) -> list[str]:
        """Every attribute that would make a browser load something."""
        out = []
        for tag, attrs in self.tags:
            for key in ("src", "href", "data", "poster", "srcset"):
                value = attrs.get(key) or ""
                if value and not value.startswith(("#", "data:")):
                    out.append(f"<{tag} {key}={value}>")
            if tag in ("script", "link", "iframe", "object", "embed", "img") and not (
                attrs.get("src") or ""
            ).startswith("data:"):
                out.append(f"<{tag}>")
        return out


@pytest.fixture(scope="module")
def checked():
    return review("baseline", seeds=(1, 2), **{"workload.jobs": 120})


@pytest.fixture(scope="module")
def advice():
    return advise(
        "sample", arrival_rate=1.0, replications=1, evidence_jobs=200, seed=1, progress=False
    )


@pytest.fixture(scope="module")
def review_html(checked, tmp_path_factory) -> Path:
    return checked.save_report(tmp_path_factory.mktemp("review") / "review.html")


@pytest.fixture(scope="module")
def advice_html(advice, tmp_path_factory) -> Path:
    return advice.save_report(tmp_path_factory.mktemp("advice") / "advice.html")


def test_review_report_is_one_self_contained_page(checked, review_html):
    page = Page(review_html.read_text(encoding="utf-8"))
    assert page.h2 == ["Verdicts", "Lease timeline", "Settings"]
    assert page.fetches() == [] and page.count("svg") == 1  # the timeline, inline
    assert "@media print" in page.style and "@page" in page.style
    # one badge per checklist item, in order, with the symbol and the word of its verdict
    assert page.badges == [f"{STATUS_STYLE[s][0]} {s.upper()}" for s in checked.table["status"]]
    text = " ".join(page.text)
    for row in checked.table.itertuples():
        assert row.evidence in text and f"basis: {row.basis}" in text
    assert (
        checked.tally() in text and "lease_ttl = 30.0" in text
    )  # the verdict count and the settings


def test_advice_report_carries_assumptions_risk_chart_and_evidence(advice, advice_html):
    html = advice_html.read_text(encoding="utf-8")
    page = Page(html)
    assert page.h2 == [
        "If the assumptions move",
        "The settings compared",
        "Evidence: simulation beside prediction",
        "How a lease is lost, and a crash recovered",
        "Assumptions and inputs",
    ]
    assert page.fetches() == [] and page.count("svg") == 2  # trade-off chart and timeline
    text = " ".join(page.text)
    for line in (
        advice.assumptions.lines()
        + [line.strip() for line in advice.risk_lines()]
        + advice.position
        + [advice.load_line(), advice.recovery_line(), advice.counts_line()]
        + [advice.choice_rule(), advice.heartbeat_line()]
    ):
        assert line in text, line
    assert "false expiries a day" in text and "at 1 jobs/s" in text


def test_advice_report_says_whether_the_evidence_agrees_and_marks_the_recommendation(
    advice, advice_html
):
    html = advice_html.read_text(encoding="utf-8")
    text = " ".join(Page(html).text)
    verdict, target = advice.verdict(), advice.target_line()
    assert verdict.startswith(("evidence agrees", "evidence disagrees")) and verdict in text
    assert target.startswith("target ") and target in text
    for finding in advice.findings():
        assert finding in text
    # the chart: the recommendation starred, infeasible settings faded, its range said
    assert html.count('id="mark"') == 1 and 'id="point-infeasible"' in html
    assert "The star is A; letters name the settings of the table above" in text
    # the named settings' table: one row per setting, with its letter and role
    for row in advice.shortlist.itertuples():
        setting = setting_words(row.ttl, row.heartbeat_interval, row.watcher_interval)
        assert row.role in text and setting in text, setting


def test_advice_report_of_a_busy_pool_carries_the_load_warning(tmp_path):
    with pytest.warns(sim.scenario.settings.LeaseWarning, match="utilisation 84%"):
        busy = advise("sample", arrival_rate=1.5, verify=False)
    text = " ".join(Page(busy.save_report(tmp_path / "busy.html").read_text("utf-8")).text)
    assert f"warning: {busy.warnings()[0]}" in text and busy.load_line() in text
    assert "84% of the 1.78 jobs/s that 4 workers carry" in busy.load_line()


def test_a_review_report_can_carry_the_advice_and_an_advice_report_the_review(
    checked, advice, tmp_path
):
    both = Page(checked.save_report(tmp_path / "r.html", advice=advice).read_text(encoding="utf-8"))
    assert both.h2[:4] == [
        "Verdicts",
        "Lease timeline",
        "Settings",
        "Advice: A = TTL 3 s, heartbeat every 1 s, watcher every 0.5 s",
    ]
    assert "Assumptions and inputs" in both.h2
    other = Page(
        advice.save_report(tmp_path / "a.html", review=checked).read_text(encoding="utf-8")
    )
    assert (
        other.h2[0] == "If the assumptions move"
        and "Verdicts" in other.h2
        and len(other.badges) == len(checked.table)
    )


@pytest.fixture(scope="module")
def chromium() -> str:
    """Chromium from Debian's packages, installed by apt-get when missing (CI runs as root)."""
    return ensure_chromium()


@pytest.mark.parametrize("which", ["review", "advice"])
def test_chromium_renders_the_report(which, chromium, review_html, advice_html, checked, tmp_path):
    """Headless Chromium, network features off, screenshots the page: it is drawn (not blank), the
    verdict badges show in their colours, and the inline figures have real size."""
    source = review_html if which == "review" else advice_html
    png = tmp_path / f"{which}.png"
    done = screenshot(source, png, tmp_path / "profile", width=1200, height=2600, chromium=chromium)
    assert done.returncode == 0 and png.exists(), done.stderr[-2000:]
    pixels = matplotlib.image.imread(png)[:, :, :3]
    assert pixels.shape[:2] == (2600, 1200)
    ink = (pixels.mean(axis=2) < 0.5).mean()
    assert 0.01 < ink < 0.5, f"{ink:.1%} dark pixels: blank or broken page"

    def share(hex_colour: str) -> float:
        rgb = np.array([int(hex_colour[i : i + 2], 16) / 255 for i in (1, 3, 5)])
        return float((np.abs(pixels - rgb).max(axis=2) < 0.03).mean())

    if which == "review":
        shown = set(checked.table["status"])
        for status, (_symbol, face, _ink) in STATUS_STYLE.items():
            if status in shown and face != "#FFFFFF":
                assert share(face) > 1e-4, f"no {status} badge colour {face} on the page"
    else:  # the trade-off chart's colour bar (cividis) is drawn: its darkest blue is on the page
        assert share("#00224e") > 1e-5


def test_report_from_the_command_line(tmp_path, capsys):
    out = tmp_path / "review.html"
    assert (
        main(
            [
                "review",
                "baseline",
                "--seeds",
                "1",
                "--no-variants",
                "--set",
                "workload.jobs=60",
                "--report",
                str(out),
            ]
        )
        == 0
    )
    assert (
        f"wrote {out}" in capsys.readouterr().out
        and Page(out.read_text(encoding="utf-8")).h2[0] == "Verdicts"
    )
    # an existing report is not overwritten without --force; the file stays as it was
    before = out.read_bytes()
    assert main(["review", "baseline", "--seeds", "1", "--report", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert (
        len(err) == 1
        and err[0].startswith(f"error: --report {out}: exists")
        and out.read_bytes() == before
    )
    advice = tmp_path / "advice.html"
    assert main(["advise", "sample", "--no-verify", "--report", str(advice)]) == 0
    assert Page(advice.read_text(encoding="utf-8")).h2[0] == "If the assumptions move"


@pytest.mark.parametrize(
    "argv, message",
    [
        (
            ["review", "baseline", "--report", "review.pdf"],
            "--report review.pdf: expected a file name ending in .html",
        ),
        (
            ["advise", "sample", "--report", "nowhere/advice.html"],
            "directory nowhere does not exist",
        ),
    ],
)
def test_report_bad_path_is_one_error_line(argv, message, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0]
    assert list(tmp_path.iterdir()) == []


def test_the_settings_toml_cuts_long_sample_lists_and_says_so(advice):
    from sim.checklist.report import scenario_toml

    text = scenario_toml(advice.scenario(jobs=50))
    first = ", ".join(f"{v:g}" for v in advice.durations.samples[:8])
    assert f"samples = [{first}, ...]  # 2000 values, first 8 shown" in text
    assert scenario_toml(sim.preset("baseline")) == sim.scenario.settings.dumps(
        sim.preset("baseline")
    )  # nothing to cut


def test_missing_intervals_read_n_a_not_nan(advice_html):
    text = " ".join(Page(advice_html.read_text(encoding="utf-8")).text)
    assert "nan" not in text.lower().split() and "(nan" not in text
