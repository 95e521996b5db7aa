"""The hunt in the one-file HTML report: the section "The shortest bad timeline", one part per
broken invariant (what broke, the account, the schedule, the timeline figure with the breaking
events starred and the faults labelled, the timeline as text, the PostgreSQL replay), or the
certificate with its scope, or how much was checked. sim.checklist.report puts it in a review's
report (Review.save_report(path, hunt=result)); HuntResult.save_report writes it as a page of its
own."""

from __future__ import annotations

from pathlib import Path

from sim.hunting.account import WHAT
from sim.plots.page import escape, figure, heading, write_page

SECTION = "The shortest bad timeline"


def hunt_section(result, level: int = 2) -> str:
    """The section's HTML."""
    h, sub = f"h{level}", f"h{level + 1}"
    parts = [f"<{h}>{SECTION}</{h}>"]
    parts.append(
        f"<p class='basis'>{escape(result.lines()[0])}; "
        + "; ".join(escape(line) for line in result.coverage.lines())
        + "</p>"
    )
    parts.append(
        "<ul class='tight'>" + "".join(f"<li>{escape(x)}</li>" for x in result.scope.lines())
    )
    parts.append("</ul>")
    for finding in result.findings.values():
        parts.append(
            f"<{sub}>{escape(finding.invariant)}: {escape(WHAT.get(finding.invariant, ''))}</{sub}>"
        )
        parts.append(f"<p class='verdict'>{escape(finding.account)}</p>")
        found = finding.found
        parts.append(
            f"<p class='basis'>first broke {found.after:.2f} s into the hunt (schedule "
            f"{found.first + 1}); the smallest breaking schedule ({found.number + 1}, "
            f"{escape(found.strategy)}) shrunk in {len(finding.shrinking)} steps; "
            f"replay: python -m sim run {escape(finding.invariant)}.toml"
            + (f" --sql {escape(finding.sql)}" if finding.sql else "")
            + "</p>"
        )
        if finding.postgres is not None:
            parts.append(f"<p>{escape(finding.postgres.line(finding.invariant))}</p>")
        parts.append(
            "<ul class='tight'>"
            + "".join(f"<li>{escape(line)}</li>" for line in finding.schedule.lines())
            + "</ul>"
        )
        parts.append(
            figure(_timeline(finding), f"{escape(finding.invariant)}: the shortest bad timeline")
        )
        parts.append("<pre>" + escape("\n".join(finding.timeline())) + "</pre>")
    if not result.findings:
        lines = (
            result.certificate.lines() if result.certificate is not None else result.lines()[-1:]
        )
        parts.append("<pre>" + escape("\n".join(lines)) + "</pre>")
    return "\n".join(parts)


def _timeline(finding):
    from matplotlib.figure import Figure

    workers = finding.scenario.policy.workers
    fig = Figure(figsize=(11, 1.9 + 0.42 * (workers + 1)), layout="constrained")
    finding.figure(fig.add_subplot())
    return fig


def hunt_report(result, path: Path) -> Path:
    """Write the hunt as one self-contained HTML page."""
    title = f"Hunt: {result.source}"
    verdict = (
        f"{len(result.findings)} invariant(s) broken: {', '.join(result.findings)}"
        if result.findings
        else (result.certificate.headline() if result.certificate else "no violation found")
    )
    return write_page(path, title, [heading(title, verdict), hunt_section(result)])
