"""The one self-contained HTML page the reports share (the review's, the advice's, the hunt's):
its style, heading, figures as inline SVG, and a write that never leaves half a file.

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
