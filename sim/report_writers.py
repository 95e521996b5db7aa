"""Where Review.save_report and Advice.save_report find the function that writes their HTML file.

sim.report, the layer above review and advisor (it draws both), registers its writers here when it
is imported, and sim/__init__ imports it; so review and advisor never import sim.report.
"""

from __future__ import annotations

from collections.abc import Callable

_WRITERS: dict[str, Callable] = {}


def register(kind: str, write: Callable) -> None:
    """Called by sim.report: `write(obj, path, **options)` writes the report of a `kind` ("review", "advice")."""
    _WRITERS[kind] = write


def writer(kind: str) -> Callable:
    """The function that writes a `kind` report (sim.report's, registered when `sim` is imported)."""
    if kind not in _WRITERS:
        raise RuntimeError(f"no {kind} report writer: import sim (sim.report registers it)")
    return _WRITERS[kind]
