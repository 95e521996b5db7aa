"""The advice as one self-contained HTML page for a design review (sim.checklist.report writes the
page).

Its first screen answers what a team asks first, in three boxes side by side: what to set (in the
queue's own setting names when a queue is given, `--as`), what it costs a day, and what the answer
rests on. Below them: how the answer moves when the assumptions move, the named settings side by
side with the trade-off chart, the evidence, the run that explains the risk (a false expiry and a
crash recovery, marked), and the assumptions and inputs in full. Every figure is one the text
advice prints, from the same functions; every cell is escaped ("< 0.0001%" stays text).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from sim.advice import sensitivity
from sim.advice import text as advice_text
from sim.advice.shortlist import carried, heartbeat_of, label, setting_words
from sim.plots.page import escape, figure, heading, timeline_figure, write_page
from sim.support.in_words import amount, count, duration, percent


def advice_report(
    advice, path: str | Path, *, review=None, settings=None, timeline: bool = True
) -> Path:
    """Write the lease-settings advice (and a design review of it, if given) as one HTML file;
    `settings`: the advice in a queue's own settings (sim.advice.queue_terms.in_queue_terms) or a
    queue's name."""
    settings = _queue(advice, settings)
    title = "Lease settings advice"
    body = [
        heading(f"{title}: A = {_setting(advice)}", _subtitle(advice)),
        advice_sections(advice, level=2, timeline=timeline and review is None, settings=settings),
    ]
    if review is not None:
        body.append(review.html_sections())
    return write_page(path, title, body)


def _queue(advice, settings):
    if settings is None or not isinstance(settings, str):
        return settings
    from sim.advice.queue_terms import in_queue_terms

    return in_queue_terms(advice, settings)


def _setting(advice) -> str:
    return setting_words(advice.ttl, advice.heartbeat_interval, advice.watcher_interval)


def _subtitle(advice) -> str:
    read = advice.inputs.get("durations_read", {})
    source = read.get("source") or "the durations given"
    return f"for {count(advice.inputs['durations_n'], 'job duration')} from {source}"


# ---- the first screen ---------------------------------------------------------------------------


def answer(advice, settings=None) -> str:
    """The three boxes: what to set, what it costs a day, what it rests on."""
    row = carried(advice, settings)
    rests = sensitivity.rests_on(advice, row)
    return (
        "<section class='answer'>"
        + _set_box(advice, settings, row)
        + _cost_box(advice, settings, row)
        + "<div class='card' id='assumed'><h3>What it rests on</h3>"
        f"<p>{escape(rests.removeprefix('rests on '))}</p><ul class='tight'>"
        + "".join(
            f"<li>{escape(line)}</li>"
            for line in advice.assumptions.lines()
            if line.startswith(("pauses:", "DB:"))
        )
        + "</ul></div></section>"
    )


def _set_box(advice, settings, row) -> str:
    if settings is None:
        h = advice.heartbeat_interval
        lines = [
            ("lease TTL", duration(advice.ttl)),
            ("heartbeat", "none" if h is None else f"every {duration(h)}"),
            ("stuck watcher", f"every {duration(advice.watcher_interval)}"),
        ]
        where, note = "A, in Lease Lab's terms (--as QUEUE: in your queue's)", ""
    else:
        lines = [(s.name, s.text) for s in settings.settings] or [
            ("(nothing)", "it has no lease, heartbeat or rescue setting to change")
        ]
        name = "" if row is None else f"{row['name']}, "
        where = f"{name}in {settings.label}'s own settings"
        kept = (
            f"{settings.label} runs a mechanism of its own"
            if row is None
            else f"{row['name']} in Lease Lab's terms: "
            + setting_words(row["ttl"], heartbeat_of(row), row["watcher_interval"])
        )
        note = f"<p class='small'>{escape(kept)}"
        if settings.cannot:
            note += (
                f"; what it cannot do, and its every setting's reason: "
                f"<a href='#queue'>{escape(settings.label)}'s own settings</a>, below"
            )
        note += "</p>"
    body = "".join(
        f"<li><span class='key'>{escape(k)}</span> = <b>{escape(v)}</b></li>" for k, v in lines
    )
    return (
        f"<div class='card' id='set'><h3>Set {escape(where)}</h3>"
        f"<ul class='settings'>{body}</ul>{note}</div>"
    )


def _cost_box(advice, settings, row) -> str:
    """What the setting the queue runs costs a day (A's, said to be A's, when the queue runs a
    mechanism of its own), and A beside it when it is another."""
    rate = advice.inputs["jobs_per_s"]
    given = "" if advice.inputs["arrival_rate"] is not None else " (assumed)"
    own = row is None
    a = advice.shortlist.iloc[0]
    row = a if own else row
    per_day, high = row["false_expiries_per_day"], row["false_expiries_per_day_high"]
    if row["name"] == "A":
        simulated = " (simulated)" if advice.recovery_source == "simulated" else ""
        recovery, load = advice.recovery_mean, advice.db_load
    else:
        simulated, recovery, load = "", row["predicted_recovery_mean"], row["db_load"]
    items = [
        f"<b>{escape(amount(per_day))}</b> false expiries a day (95% upper bound "
        f"{escape(amount(high))}; {escape(advice.target_text())})",
        f"up to <b>{escape(amount(365 * per_day))}</b> duplicate PSP calls a year, unless the "
        "call carries an idempotency key",
        f"a crashed job is claimed again after <b>~{escape(duration(recovery))}</b>{simulated}",
        f"<b>{escape(amount(load))}</b> heartbeat + watcher statements/s",
    ]
    worst = getattr(settings, "worst_wait", None)
    if worst is not None and not own:
        items.append(f"at worst a crashed job waits {escape(duration(worst))} to be found")
    if own:
        items.append(
            f"{escape(settings.label)} runs a mechanism of its own: its own lines, below, "
            "say what it costs"
        )
    elif row["name"] != "A":
        items.append(
            f"{escape(label(a))} would cost {escape(amount(advice.false_expiries_per_day))} a day "
            f"and recover in ~{escape(duration(advice.recovery_mean))}"
        )
    return (
        f"<div class='card' id='cost'><h3>What {escape(row['name'])} costs, at {rate:.3g} "
        f"jobs/s{given}</h3><ul class='tight'>"
        + "".join(f"<li>{item}</li>" for item in items)
        + "</ul></div>"
    )


# ---- the sections -------------------------------------------------------------------------------


def advice_sections(
    advice, *, level: int, timeline: bool, settings=None, heading: bool = False
) -> str:
    """The advice's part of a page: the answer, then the details (the review page embeds it,
    under a heading of its own)."""
    h = f"h{level}"
    missed = advice.shortfall()
    parts = [
        f"<{h}>Advice: A = {escape(_setting(advice))}</{h}>" if heading else "",
        answer(advice, settings),
        f"<p class='warning'>{escape(missed)}</p>" if missed else "",
        "".join(f"<p class='warning'>warning: {escape(w)}</p>" for w in advice.warnings()),
        f"<{h}>If the assumptions move</{h}>",
        "<p>A's false expiries a day under each moved assumption, and the setting the same rule "
        "picks under it (from the risk model; simulated below).</p>",
        sensitivity_table(advice),
        f"<{h}>The settings compared</{h}>",
        f"<p>{escape(advice_text.choice_rule(advice))}. Each named setting is one row of the "
        "candidate table; the text, this table, the chart and the evidence use the same "
        "letters.</p>",
        shortlist_table(advice),
        "<ul class='tight'>"
        + "".join(f"<li>{escape(line)}</li>" for line in advice.position)
        + f"<li>{escape(advice.heartbeat_line())}</li></ul>",
        figure(
            _tradeoff_figure(advice),
            "Each point is one setting as sim.theory.closed_forms predicts it, at A's watcher "
            "interval, for "
            "no heartbeat and A's heartbeat (and the named settings wherever they are): left is "
            "a smaller false-expiry risk per job (whiskers: 95% upper bounds), down a faster "
            "recovery; bigger, lighter markers cost more heartbeat and watcher statements per "
            "second. The star is A; letters name the settings of the table above; faded points "
            "are not feasible.",
        ),
    ]
    parts += _evidence(advice, h)
    if timeline:
        parts += _explained(advice, h)
    parts += _details(advice, h, settings)
    return "\n".join(parts)


def _evidence(advice, h: str) -> list[str]:
    parts = []
    if advice.evidence is not None and len(advice.evidence):
        lines = [advice.verdict(), advice.target_line(), *advice.findings()]
        parts += [
            f"<{h}>Evidence: simulation beside prediction</{h}>",
            evidence_table(advice.evidence),
            "".join(f"<p class='verdict'>{escape(line)}</p>" for line in lines if line),
        ]
    moved = advice.sensitivity_evidence
    if moved is not None and len(moved):
        parts += [
            "<p><b>The model under the moved assumptions, against simulation at A</b> (pauses "
            "made frequent enough to count, the model asked at the rate simulated; DB failovers "
            "scripted, counted per failover):</p>",
            "<ul class='tight'>"
            + "".join(f"<li>{escape(line)}</li>" for line in sensitivity.evidence_lines(moved))
            + "</ul>",
        ]
    return parts


def _explained(advice, h: str) -> list[str]:
    from sim.advice.timeline import explain

    try:
        story = explain(advice, seed=int(advice.inputs.get("seed") or 0) + 1)
    except RuntimeError as exc:
        return [f"<{h}>How a lease is lost</{h}>", f"<p>{escape(exc)}</p>"]
    fig = timeline_figure(story.run, window=story.window)
    _mark(fig.axes[0], story)
    return [
        f"<{h}>How a lease is lost, and a crash recovered</{h}>",
        figure(fig, escape(story.caption())),
    ]


def _mark(ax, story) -> None:
    """Label the pause (the false expiry) and the crash (the recovery) on the timeline."""
    for text, at, worker in (
        (
            f"paused {duration(story.pause)} > {duration(story.slack)}: lease lost",
            story.pause_at,
            story.pause_worker,
        ),
        (
            f"crash: claimed again after {duration(story.recovery)}",
            story.crash_at,
            story.crash_worker,
        ),
    ):
        ax.annotate(
            text,
            xy=(at, worker),
            xytext=(at, worker - 0.45),
            ha="left",
            va="bottom",
            fontsize=9,
            color="#8a3b00",
            fontweight="bold",
            gid="story",
        )


def _details(advice, h: str, settings) -> list[str]:
    read = advice.inputs.get("durations_read", {})
    measured = advice.inputs.get("pauses_read")
    parts = [
        f"<{h}>Assumptions and inputs</{h}>",
        "<p>The risk figures hold under these assumptions and no others: check them against your "
        "monitoring.</p>",
        "<ul class='tight'>"
        + "".join(f"<li>{escape(line)}</li>" for line in advice.assumptions.lines())
        + (f"<li>pauses: {escape(measured['echo'])}</li>" if measured else "")
        + f"<li>durations: {escape(read.get('echo', ''))}</li>"
        + f"<li>{escape(advice.load_line())}</li>"
        + "".join(f"<li>{escape(line.strip())}</li>" for line in advice.risk_lines())
        + f"<li>{escape(advice.recovery_line())}</li>"
        + f"<li>{escape(advice.counts_line())}</li></ul>",
        inputs_table(advice),
    ]
    if settings is not None:
        parts += [
            f"<{h} id='queue'>In {escape(settings.label)}'s own settings</{h}>",
            f"<pre>{escape(str(settings))}</pre>",
        ]
    return parts


# ---- tables -------------------------------------------------------------------------------------


def _table(head: list[str], rows: list[list[str]], numeric: frozenset[int] = frozenset()) -> str:
    """An HTML table, every cell escaped."""
    out = "<table><tr>" + "".join(f"<th>{escape(c)}</th>" for c in head) + "</tr>"
    for row in rows:
        out += "<tr>" + "".join(
            f"<td class='num'>{escape(c)}</td>" if i in numeric else f"<td>{escape(c)}</td>"
            for i, c in enumerate(row)
        )
        out += "</tr>"
    return out + "</table>"


def sensitivity_table(advice) -> str:
    moved = advice.sensitivity
    rows = []
    for r in moved.itertuples():
        h = None if pd.isna(r.heartbeat_interval) else r.heartbeat_interval
        same = r.name == "A"
        rows.append(
            [
                r.change,
                f"{amount(r.a_per_day)} ({amount(r.a_per_day_high)})",
                "" if not np.isfinite(r.a_per_failover) else amount(r.a_per_failover),
                "A, unchanged"
                if same
                else f"{r.name + ': ' if r.name else ''}"
                f"{setting_words(r.ttl, h, r.watcher_interval)}",
                f"{amount(r.per_day)} ({amount(r.per_day_high)})",
                duration(r.recovery),
            ]
        )
    return _table(
        [
            "assumption",
            "A: false expiries a day (upper bound)",
            "leases lost per failover",
            "the advice under it",
            "its false expiries a day",
            "its recovery",
        ],
        rows,
        frozenset({1, 2, 4, 5}),
    )


def shortlist_table(advice) -> str:
    rows = []
    for r in advice.shortlist.itertuples():
        rows.append(
            [
                r.name,
                setting_words(r.ttl, r.heartbeat_interval, r.watcher_interval),
                f"{percent(r.predicted_false_expiry)} ({percent(r.predicted_false_expiry_high)})",
                f"{amount(r.false_expiries_per_day)} ({amount(r.false_expiries_per_day_high)})",
                duration(r.predicted_recovery_mean),
                amount(r.db_load),
                duration(r.score) if r.feasible else "not feasible",
                r.role,
            ]
        )
    return _table(
        [
            "",
            "setting",
            "false expiry per job (95% upper bound)",
            "a day (upper bound)",
            "recovery",
            "statements/s",
            "score",
            "what it is",
        ],
        rows,
        frozenset({2, 3, 4, 5, 6}),
    )


def evidence_table(evidence: pd.DataFrame) -> str:
    rows = []
    for r in evidence.itertuples():
        interval = (
            f"{duration(r.recovery_ci_low)} to {duration(r.recovery_ci_high)}"
            if pd.notna(r.recovery_ci_low)
            else f"too few crashes ({r.recoveries}) for an interval"
        )
        rows.append(
            [
                f"{r.name}: {setting_words(r.ttl, heartbeat_of(r), r.watcher_interval)}",
                str(r.runs),
                str(r.leases),
                f"{r.false_expiries} ({percent(r.false_expiry_ci_low)} to "
                f"{percent(r.false_expiry_ci_high)})",
                percent(r.predicted_false_expiry),
                f"{duration(r.recovery_mean)} ({interval})",
                duration(r.predicted_recovery_mean),
                f"{percent(r.utilisation)}, {r.crash_rate:g}",
            ]
        )
    return _table(
        [
            "setting",
            "runs",
            "leases",
            "false expiries (95% interval)",
            "predicted",
            "recovery mean (95% interval)",
            "predicted at the crash rate simulated",
            "busy, crashes per worker-hour",
        ],
        rows,
        frozenset({1, 2, 3, 4, 5, 6, 7}),
    )


def inputs_table(advice) -> str:
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
        + "".join(f"<tr><th>{escape(k)}</th><td>{escape(v)}</td></tr>" for k, v in rows)
        + "</table>"
    )


def _tradeoff_figure(advice):
    from matplotlib.figure import Figure

    from sim.plots import advice_chart

    fig = Figure(figsize=(10, 6.2), layout="constrained")
    advice_chart(advice, fig.add_subplot())
    return fig
