"""One self-contained HTML file to bring to the design review: settings, verdicts with their
evidence, the lease timeline, and (sim.advice.page) the advice.

    sim.review("baseline").save_report("review.html")
    sim.advise("sample").save_report("advice.html")

or from the command line: python -m sim review baseline --report review.html, and
python -m sim advise sample --report advice.html.

The page itself (style, heading, figures as inline SVG) is sim.plots.page, shared by every report.
"""

from __future__ import annotations

import re
from pathlib import Path

from sim.checklist.verdicts import STATUS_STYLE
from sim.plots.page import escape, figure, heading, timeline_figure, write_page
from sim.scenario.settings import dumps
from sim.support.in_words import count


def review_report(review, path: str | Path, *, advice=None, hunt=None) -> Path:
    """Write the design review (and the advice behind it, and a hunt's shortest bad timelines,
    if given) as one HTML file."""
    title = f"Design review: {review.scenario.name}"
    body = [heading(title, review.header()), review_sections(review)]
    if advice is not None:
        from sim.advice.page import advice_sections

        body.append(advice_sections(advice, level=2, timeline=False, heading=True))
    if hunt is not None:
        from sim.hunting.report import hunt_section

        body.append(hunt_section(hunt))
    return write_page(path, title, body)


# ---- sections ------------------------------------------------------------------------------------


def review_sections(review) -> str:
    rows = []
    for _key, row in review.table.iterrows():
        symbol = STATUS_STYLE[row["status"]][0]
        rows.append(
            f"<tr><td><span class='badge {row['status']}'>{symbol} "
            f"{row['status'].upper()}</span></td><td>{escape(row['item'])}</td>"
            f"<td>{escape(row['evidence'])}<div class='basis'>basis: "
            f"{escape(row['basis'])}</div></td></tr>"
        )
    run, where = review.showcase()
    shown = figure(
        timeline_figure(run),
        f"Lease timeline of {escape(where)}, seed {run.scenario.seed} "
        "(bars: leases, hatched by how they ended; x: crash; o: completion refused by fencing).",
    )
    return "\n".join(
        [
            "<h2>Verdicts</h2>",
            f"<p class='headline'>{escape(review.tally())}</p>",
            "<p>PASS only where the runs show the property; UNTESTED where they did not exercise "
            "it (neither a pass nor a failure); each verdict names the runs it rests on.</p>",
            "<table><tr><th>verdict</th><th>checklist item</th>"
            "<th>evidence measured by simulation</th></tr>",
            *rows,
            "</table>",
            "<h2>Lease timeline</h2>",
            shown,
            "<h2>Settings</h2>",
            _settings_table(review.scenario),
            "<details open><summary>scenario as TOML</summary>"
            f"<pre>{escape(scenario_toml(review.scenario))}</pre></details>",
        ]
    )


def _settings_table(scenario) -> str:
    p, f = scenario.policy, scenario.faults
    rows = [
        ("workers, claim", f"{p.workers}, {p.claim}"),
        ("lease TTL", f"{p.lease_ttl:g} s"),
        ("heartbeat", f"every {p.heartbeat_interval:g} s" if p.heartbeat else "off"),
        ("watcher", f"every {p.watcher_interval:g} s ({p.watcher_action})" if p.watcher else "off"),
        (
            "fencing, dedup marker, idempotency key",
            f"{_on(p.fencing)}, {_on(p.dedup)}, {_on(p.idempotency_key)}",
        ),
        (
            "faults",
            f"crashes {f.crash_rate:g}/worker-hour, pauses {f.pause_rate:g}/worker-hour, "
            f"partitions {f.partition_rate:g}/worker-hour, "
            f"scripted: {count(len(f.crashes), 'crash', 'crashes')}, "
            f"{count(len(f.pauses), 'pause')}, {count(len(f.partitions), 'partition')}",
        ),
        ("horizon", f"{scenario.horizon:g} s"),
    ]
    return (
        "<table>"
        + "".join(f"<tr><th>{escape(k)}</th><td>{escape(v)}</td></tr>" for k, v in rows)
        + "</table>"
    )


def scenario_toml(scenario, keep: int = 8) -> str:
    """The scenario as TOML, with long sample lists (observed durations) cut to their first `keep`
    values and a comment saying how many there are: the page stays readable, the numbers true."""

    def cut(match):
        values = [v for v in match.group(2).split(",") if v.strip()]
        if len(values) <= keep:
            return match.group(0)
        shown = ", ".join(v.strip() for v in values[:keep])
        return f"{match.group(1)}[{shown}, ...]  # {len(values)} values, first {keep} shown"

    return re.sub(r"(samples = )\[([^\]]*)\]", cut, dumps(scenario))


def _on(flag: bool) -> str:
    return "on" if flag else "off"
