"""One self-contained HTML file to bring to the design review: settings, assumptions, verdicts with
their evidence, the lease timeline, the trade-off chart and the advice.

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

import pandas as pd

from sim.checklist import STATUS_STYLE
from sim.scenario import dumps
from sim.wording import amount, count, duration, percent

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
@page { size: A4; margin: 14mm; }
@media print {
  body { margin: 0; max-width: none; font-size: 11px; }
  h2 { break-after: avoid; page-break-after: avoid; }
  .badge, th { -webkit-print-color-adjust: exact; print-color-adjust: exact; }
}
"""


def review_report(review, path: str | Path, *, advice=None, hunt=None) -> Path:
    """Write the design review (and the advice behind it, and a hunt's shortest bad timelines,
    if given) as one HTML file."""
    title = f"Design review: {review.scenario.name}"
    body = [_h1(title, review.header()), _review_sections(review)]
    if advice is not None:
        body.append(_advice_sections(advice, level=2, timeline=False))
    if hunt is not None:
        from sim.hunt.report import hunt_section

        body.append(hunt_section(hunt))
    return _write(path, title, body)


def advice_report(advice, path: str | Path, *, review=None, timeline_jobs: int = 300) -> Path:
    """Write the lease-settings advice (and a design review of it, if given) as one HTML file."""
    title = "Lease settings advice"
    body = [
        _h1(title, advice.headline()),
        _advice_sections(advice, level=2, timeline=review is None, timeline_jobs=timeline_jobs),
    ]
    if review is not None:
        body.append(_review_sections(review))
    return _write(path, title, body)


# ---- sections ------------------------------------------------------------------------------------


def _review_sections(review) -> str:
    rows = []
    for _key, row in review.table.iterrows():
        symbol = STATUS_STYLE[row["status"]][0]
        rows.append(
            f"<tr><td><span class='badge {row['status']}'>{symbol} "
            f"{row['status'].upper()}</span></td><td>{_e(row['item'])}</td>"
            f"<td>{_e(row['evidence'])}<div class='basis'>basis: {_e(row['basis'])}</div></td></tr>"
        )
    run, where = review.showcase()
    figure = _figure(
        _timeline_figure(run),
        f"Lease timeline of {_e(where)}, seed {run.scenario.seed} "
        "(bars: leases, hatched by how they ended; x: crash; o: completion refused by fencing).",
    )
    return "\n".join(
        [
            "<h2>Verdicts</h2>",
            f"<p class='headline'>{_e(review.tally())}</p>",
            "<p>PASS only where the runs show the property; UNTESTED where they did not exercise "
            "it (neither a pass nor a failure); each verdict names the runs it rests on.</p>",
            "<table><tr><th>verdict</th><th>checklist item</th>"
            "<th>evidence measured by simulation</th></tr>",
            *rows,
            "</table>",
            "<h2>Lease timeline</h2>",
            figure,
            "<h2>Settings</h2>",
            _settings_table(review.scenario),
            "<details open><summary>scenario as TOML</summary>"
            f"<pre>{_e(scenario_toml(review.scenario))}</pre></details>",
        ]
    )


def _advice_sections(advice, *, level: int, timeline: bool, timeline_jobs: int = 300) -> str:
    from sim.plots.advice import chart_ttls

    i = advice.inputs
    h = f"h{level}"
    read = i.get("durations_read", {})
    evidence = [line for line in (advice.verdict(), advice.target_line()) if line]
    parts = [
        f"<{h}>Advice</{h}>",
        f"<p class='headline'>{_e(advice.headline())}</p>",
        f"<p class='warning'>{_e(advice.shortfall())}</p>" if not advice.met else "",
        "".join(f"<p class='warning'>warning: {_e(w)}</p>" for w in advice.warnings()),
        f"<p class='load'>{_e(advice.load_line())}</p>",
        "".join(f"<p class='verdict'>{_e(line)}</p>" for line in evidence),
        "".join(f"<p class='finding'>{_e(line)}</p>" for line in advice.findings()),
        "<ul class='tight'>"
        + "".join(f"<li>{_e(line.strip())}</li>" for line in advice.risk_lines())
        + "</ul>",
        f"<{h}>Trade-off</{h}>",
        f"<p>{_e(advice.tradeoff_lines()[0]) if advice.tradeoff_lines() else ''}</p>",
        _neighbours_table(advice),
        "<p><b>Where it sits in the searched range</b></p>",
        "<ul class='tight'>"
        + "".join(f"<li>{_e(line)}</li>" for line in advice.position)
        + "</ul>",
        _figure(
            _tradeoff_figure(advice),
            "Each point is one setting as sim.analytic predicts it, at the recommended watcher "
            "interval: left is a smaller false-expiry risk per job (whiskers: 95% upper bounds), "
            "down a faster recovery; bigger, lighter markers cost more heartbeat and watcher "
            "statements per second. The star is the recommendation; faded points are not "
            f"feasible. TTLs up to {_e(duration(max(chart_ttls(advice))))}: far enough to reach "
            "the first feasible TTL of each line; longer ones only recover more slowly.",
        ),
        f"<{h}>Assumptions</{h}>",
        "<p>The risk figures hold under these assumptions and no others: check them against your "
        "monitoring.</p>",
        "<ul class='tight'>"
        + "".join(f"<li>{_e(line)}</li>" for line in advice.assumptions.lines())
        + f"<li>durations: {_e(read.get('echo', ''))}</li>"
        + f"<li>{_e(advice.recovery_line())}</li>"
        + f"<li>{_e(advice.counts_line())}</li></ul>",
        _inputs_table(advice),
    ]
    if advice.evidence is not None and len(advice.evidence):
        parts += [
            f"<{h}>Evidence: simulation beside prediction</{h}>",
            _evidence_table(advice.evidence),
        ]
    if timeline:
        from sim.runner import run as simulate

        run = simulate(advice.scenario(jobs=timeline_jobs, seed=int(i.get("seed") or 0) + 1))
        parts += [
            f"<{h}>Lease timeline of the advised setting</{h}>",
            _figure(
                _timeline_figure(run),
                f"{timeline_jobs} jobs of the advised scenario, seed "
                f"{run.scenario.seed}: bars are leases; heartbeats keep long jobs' leases alive.",
            ),
        ]
    return "\n".join(parts)


def _inputs_table(advice) -> str:
    i = advice.inputs
    rate = (
        f"{i['jobs_per_s']:.3g} jobs/s assumed (none given)"
        if i["arrival_rate"] is None
        else f"{i['arrival_rate']:g} jobs/s"
    )
    rows = [
        ("target false expiry", f"{advice.target_text()} (margin {i['margin']:g})"),
        ("preference", advice.choice_rule()),
        ("workers, poll interval", f"{i['workers']}, every {i['poll_interval']:g} s"),
        ("arrival rate", f"{rate}; {percent(advice.utilisation)} of the workers' capacity"),
        ("TTL floor (min_ttl)", "none" if i["min_ttl"] is None else f"{i['min_ttl']:g} s"),
        (
            "max DB load",
            "none" if i["max_db_load"] is None else f"{i['max_db_load']:g} statements/s",
        ),
        ("TTLs searched", ", ".join(f"{t:g}" for t in i.get("searched", {}).get("ttl", [])) + " s"),
    ]
    return (
        "<table>"
        + "".join(f"<tr><th>{_e(k)}</th><td>{_e(v)}</td></tr>" for k, v in rows)
        + "</table>"
    )


def _neighbours_table(advice) -> str:
    """The recommendation beside the best setting one TTL step either side."""
    frame = advice.neighbours
    if frame is None or not len(frame):
        return ""
    head = (
        "<tr><th>setting</th><th>false expiry per job (95% upper bound)</th>"
        "<th>a day (upper bound)</th><th>recovery</th><th>statements/s</th><th>score</th></tr>"
    )
    rows = []
    for r in frame.itertuples():
        beat = "none" if pd.isna(r.heartbeat_interval) else duration(r.heartbeat_interval)
        mark = " (recommended)" if r.step == "chosen" else f" (one step {r.step})"
        rows.append(
            f"<tr><td>TTL {_e(duration(r.ttl))}, heartbeat {_e(beat)}, watcher "
            f"{_e(duration(r.watcher_interval))}{mark}</td>"
            f"<td class='num'>{percent(r.predicted_false_expiry)} "
            f"({percent(r.predicted_false_expiry_high)})</td>"
            f"<td class='num'>{_e(amount(r.false_expiries_per_day))} "
            f"({_e(amount(r.false_expiries_per_day_high))})</td>"
            f"<td class='num'>{_e(duration(r.predicted_recovery_mean))}</td>"
            f"<td class='num'>{_e(amount(r.db_load))}</td>"
            f"<td class='num'>{_e(duration(r.score)) if r.feasible else 'not feasible'}</td></tr>"
        )
    return "<table>" + head + "".join(rows) + "</table>"


def _evidence_table(evidence: pd.DataFrame) -> str:
    head = (
        "<tr><th>TTL</th><th>runs</th><th>leases</th><th>false expiries (95% interval)</th>"
        "<th>predicted</th><th>recovery mean (95% interval)</th><th>predicted</th>"
        "<th>busy, crashes per worker-hour</th></tr>"
    )
    rows = []
    for r in evidence.itertuples():
        mark = " (recommended)" if r.recommended else ""
        interval = (
            f"{duration(r.recovery_ci_low)} to {duration(r.recovery_ci_high)}"
            if pd.notna(r.recovery_ci_low)
            else f"too few crashes ({r.recoveries}) for an interval"
        )
        rows.append(
            f"<tr><td>{r.ttl:g} s{mark}</td><td class='num'>{r.runs}</td>"
            f"<td class='num'>{r.leases}</td>"
            f"<td class='num'>{r.false_expiries} ({percent(r.false_expiry_ci_low)} to "
            f"{percent(r.false_expiry_ci_high)})</td>"
            f"<td class='num'>{percent(r.predicted_false_expiry)}</td>"
            f"<td class='num'>{duration(r.recovery_mean)} ({_e(interval)})</td>"
            f"<td class='num'>{duration(r.predicted_recovery_mean)}</td>"
            f"<td class='num'>{percent(r.utilisation)}, {r.crash_rate:g}</td></tr>"
        )
    return "<table>" + head + "".join(rows) + "</table>"


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
        + "".join(f"<tr><th>{_e(k)}</th><td>{_e(v)}</td></tr>" for k, v in rows)
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


def _timeline_figure(run):
    from matplotlib.figure import Figure

    from sim.plots import auto_window, lease_timeline

    workers = min(run.scenario.policy.workers, 8)
    fig = Figure(figsize=(11, 1.9 + 0.42 * (workers + 1)), layout="constrained")
    lease_timeline(run, fig.add_subplot(), window=auto_window(run), workers=workers)
    return fig


def _tradeoff_figure(advice):
    from matplotlib.figure import Figure

    from sim.plots import advice_chart

    fig = Figure(figsize=(10, 6.2), layout="constrained")
    advice_chart(advice, fig.add_subplot())
    return fig


def _figure(fig, caption: str) -> str:
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


def _h1(title: str, subtitle: str) -> str:
    from sim import __version__

    stamp = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    return (
        f"<h1>{_e(title)}</h1><p class='meta'>{_e(subtitle)}<br>"
        f"Lease Lab {__version__}, written {stamp}; "
        "every figure below is reproducible from the settings and seeds shown.</p>"
    )


def _write(path: str | Path, title: str, body: list[str]) -> Path:
    """The page, written to a temporary file beside `path` and renamed over it
    (never half a file)."""
    path = Path(path)
    page = (
        f"<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'><title>{_e(title)}</title>"
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


def _e(text) -> str:
    return html.escape(str(text), quote=True)


def _on(flag: bool) -> str:
    return "on" if flag else "off"
