"""The README says what the notebooks and the demo do (issue 26, defect 6): a plain run is full
mode and how long it takes, how to run fast mode, every notebook by name, and the demo's runs."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")
WORDS = {2: "two", 3: "three", 4: "four", 5: "five", 6: "six"}


def _section(title: str) -> str:
    start = README.index(f"## {title}\n")
    end = README.find("\n## ", start + 1)
    return README[start : end if end > 0 else None]


def test_the_demo_line_counts_its_runs_and_scenarios():
    """The defect: the README said three teaching scenarios; the demo makes four runs."""
    from sim.demo import SCENARIOS

    runs, presets = len(SCENARIOS), len({preset for _, _, preset, _, _ in SCENARIOS})
    line = next(x for x in README.splitlines() if x.startswith("make demo"))
    assert f"{WORDS[runs]} runs of {WORDS[presets]} teaching scenarios" in line, line


def test_the_notebooks_section_says_full_mode_is_the_default_and_how_long_it_takes():
    text = " ".join(_section("Notebooks").split())
    assert "A plain run of a notebook" in text and "is **full mode**" in text
    full = re.search(r"is \*\*full mode\*\*: [^.]*about (\d+) minutes for all of them", text)
    fast = re.search(r"\*\*Fast mode\*\* [^.]*about (\d+) minutes for all of them", text)
    assert full and fast, "both modes' times, measured"
    assert int(fast.group(1)) < int(full.group(1))
    for way in ("LEASELAB_FAST=1", "-p fast True", "fast = True", "LEASELAB_HEADLESS=1"):
        assert way in text, way


def test_the_notebooks_section_names_every_notebook():
    text = _section("Notebooks")
    for path in sorted((ROOT / "notebooks").glob("[0-9][0-9]-*.ipynb")):
        assert f"`{path.stem}`" in text, path.stem
