"""One self-contained HTML file to bring to the design review: settings, verdicts with their
evidence, the lease timeline, and (sim.advice_page) the advice.

    sim.review("baseline").save_report("review.html")
    sim.advise("sample").save_report("advice.html")

or from the command line: python -m sim review baseline --report review.html, and
python -m sim advise sample --report advice.html.

Figures are inline SVG (no image files, no scripts, no fonts or styles fetched from anywhere), so
the file opens offline, mails as one attachment and prints on A4 (print CSS: no breaks inside a row
or a figure, badges keep their colours and words).
"""

from __future__ import annotations

import html
import io
import os
import re
import tempfile
from datetime import UTC, datetime
from pathlib import Path

from sim.checklist import STATUS_STYLE
from sim.scenario import dumps
from sim.wording import count

CSS = """
body { font: 14px/1.45 "DejaVu Sans", Arial, sans-serif; color: #222; max-width: 1100px;
       margin: 24px auto; padding: 0 16px; }
h1 { font-size: 22px; margin: 0 0 4px; }
h2 { font-size: 17px; margin: 28px 0 8px; border-bottom: 1px solid #ccc; }
.meta { color: #555; font-size: 12px; }
.headline { font-size: 16px; font-weight: bold; margin: 12px 0; }
table { border-collapse: collapse; width: 100%; margin: 8px 0; }
th, td { border: 1px solid #ccc; padding: 4px 8px; vertical-align: top; text-align: left; }
th { background: #f0f0f0; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
tr { break-inside: avoid; page-break-inside: avoid; }
.badge { display: inline-block; min-width: 78px; padding: 2px 6px; border: 1px solid #222;
         border-radius: 4px; font-weight: bold; text-align: center; white-space: nowrap; }
.pass { background: #009E73; color: white; } .risk { background: #E69F00; color: black; }
.fail { background: #D55E00; color: white; }
.untested { background: white; color: black; border-style: dashed; }
.basis { color: #555; font-size: 12px; margin-top: 4px; }
ul.tight li { margin: 2px 0; } .warning { color: #8a3b00; font-weight: bold; }
.verdict { font-weight: bold; } .finding { color: #8a3b00; }
figure { margin: 12px 0; break-inside: avoid; page-break-inside: avoid; }
figure svg { width: 100%; height: auto; } figcaption { font-size: 12px; color: #555; }
pre { background: #f7f7f7; border: 1px solid #ddd; padding: 8px; font-size: 12px;
      white-space: pre-wrap; }
.answer { display: grid; grid-template-columns: repeat(auto-fit, minmax(290px, 1fr)); gap: 12px;
          margin: 12px 0; }
.card { border: 2px solid #222; border-radius: 6px; padding: 8px 12px; overflow-wrap: anywhere; }
.card h3 { font-size: 15px; margin: 0 0 6px; }
ul.settings { list-style: none; padding: 0; margin: 0 0 6px; }
ul.settings li { margin: 3px 0; } .key { font-family: "DejaVu Sans Mono", monospace; }
.card p, .card ul { margin: 4px 0; } .card ul { padding-left: 18px; }
.small { color: #444; font-size: 12px; }
td, th { overflow-wrap: break-word; }
@page { size: A4; margin: 14mm; }
@media print {
  body { margin: 0; max-width: none; font-size: 11px; }
  h2 { break-after: avoid; page-break-after: avoid; }
  .badge, th { -webkit-print-color-adjust: exact; print-color-adjust: exact; }
  .answer { grid-template-columns: repeat(3, 1fr); } .card { break-inside: avoid; }
}
"""


def review_report(review, path: str | Path, *, advice=None, hunt=None) -> Path:
    """Write the design review (and the advice behind it, and a hunt's shortest bad timelines,
    if given) as one HTML file."""
    title = f"Design review: {review.scenario.name}"
    body = [heading(title, review.header()), review_sections(review)]
    if advice is not None:
        from sim.advice_page import advice_sections

        body.append(advice_sections(advice, level=2, timeline=False, heading=True))
    if hunt is not None:
        from sim.hunt.report import hunt_section

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


# ---- figures -------------------------------------------------------------------------------------


def timeline_figure(run, window=None):
    from matplotlib.figure import Figure

    from sim.plots import auto_window, lease_timeline

    workers = min(run.scenario.policy.workers, 8)
    fig = Figure(figsize=(11, 1.9 + 0.42 * (workers + 1)), layout="constrained")
    shown = window if window is not None else auto_window(run)
    lease_timeline(run, fig.add_subplot(), window=shown, workers=workers)
    return fig


def figure(fig, caption: str) -> str:
    return f"<figure>{svg(fig)}<figcaption>{caption}</figcaption></figure>"


def svg(fig) -> str:
    """A matplotlib figure as inline SVG markup (no XML prolog, text as paths: no font needed)."""
    import matplotlib

    buffer = io.StringIO()
    with matplotlib.rc_context({"svg.fonttype": "path", "svg.hashsalt": "leaselab"}):
        fig.savefig(buffer, format="svg")
    text = buffer.getvalue()
    return text[text.index("<svg") :]


# ---- page ----------------------------------------------------------------------------------------


def heading(title: str, subtitle: str) -> str:
    from sim import __version__

    stamp = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    return (
        f"<h1>{escape(title)}</h1><p class='meta'>{escape(subtitle)}<br>"
        f"Lease Lab {__version__}, written {stamp}; "
        "every figure below is reproducible from the settings and seeds shown.</p>"
    )


def write_page(path: str | Path, title: str, body: list[str]) -> Path:
    """The page, written to a temporary file beside `path` and renamed over it
    (never half a file)."""
    path = Path(path)
    page = (
        "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
        f"<title>{escape(title)}</title>"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        f"<style>{CSS}</style></head><body>\n" + "\n".join(body) + "\n</body></html>\n"
    )
    if re.search(r"(src|href)\s*=\s*['\"]https?:", page):
        raise RuntimeError("a report must not fetch anything: a figure links to the network")
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(page)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(temporary, 0o666 & ~umask)  # as open() would have made it, not mkstemp's 0600
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return path


def escape(text) -> str:
    return html.escape(str(text), quote=True)


def _on(flag: bool) -> str:
    return "on" if flag else "off"
