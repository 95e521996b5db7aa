"""Sliders that re-run a small scenario and redraw its figure (the only ipywidgets code); headless,
the explorer runs once and shows a static figure."""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from sim.errors import ConfigError
from sim.plots.style import ANNOTATION_PT
from sim.plots.timeline import busy_window
from sim.scenario.settings import LeaseWarning
from sim.teaching.notebook import widgets_available

if TYPE_CHECKING:
    from IPython.display import DisplayHandle


@dataclass
class Control:
    """One slider: a scenario setting the explorer varies."""

    name: str
    low: float
    high: float
    step: float
    value: float
    label: str = ""

    def __post_init__(self):
        if not (self.low <= self.value <= self.high) or self.step <= 0:
            raise ConfigError(
                f"{self.name}: need low <= value <= high and step > 0, got "
                f"{self.low}, {self.value}, {self.high}, step {self.step}"
            )


@dataclass
class Explorer:
    """Re-runs `make_run(**values)` and redraws its figure (see explore())."""

    make_run: Callable[..., object]
    controls: list[Control]
    draw: Callable | None = None
    figsize: tuple[float, float] = (12.0, 3.6)
    values: dict = field(default_factory=dict)
    seconds: float = float("nan")  # wall time of the last re-run and redraw
    last_run: object = None
    handle: DisplayHandle | None = None
    widgets: object = None

    def __post_init__(self):
        self.values = {c.name: c.value for c in self.controls} | self.values

    def figure(self, **changes):
        """Run with the current values (updated by `changes`) and return a new Figure."""
        from matplotlib.figure import Figure

        start = time.perf_counter()
        self.values.update(changes)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", LeaseWarning)
            run = self.make_run(**self.values)
        self.last_run = run
        fig = Figure(figsize=self.figsize, layout="constrained")
        ax = fig.add_subplot()
        (self.draw or _draw_timeline)(run, ax)
        notes = [str(w.message) for w in caught if issubclass(w.category, LeaseWarning)]
        if notes:
            fig.text(
                0.01,
                0.01,
                "warning: " + "; ".join(notes),
                fontsize=ANNOTATION_PT,
                color="#B00000",
                ha="left",
                va="bottom",
            )
        fig.canvas.draw()  # render now, so `seconds` covers the drawing too
        self.seconds = time.perf_counter() - start
        return fig

    def update(self, **changes) -> None:
        """Re-run and replace the shown figure (what a slider does)."""
        fig = self.figure(**changes)
        if self.handle is not None:
            self.handle.update(fig)

    def show(self, headless_override: bool | None = None) -> Explorer:
        """Show the figure; with a widget frontend, sliders above it re-run and redraw
        on release."""
        from IPython.display import display

        interactive = widgets_available(headless_override)
        if interactive:
            import ipywidgets as w

            sliders = []
            for c in self.controls:
                slider = w.FloatSlider(
                    value=c.value,
                    min=c.low,
                    max=c.high,
                    step=c.step,
                    description=c.label or c.name,
                    continuous_update=False,
                    readout_format=".3g",
                    style={"description_width": "initial"},
                    layout=w.Layout(width="420px"),
                )
                slider.observe(
                    lambda change, name=c.name: self.update(**{name: change["new"]}), names="value"
                )
                sliders.append(slider)
            self.widgets = w.VBox(sliders)
            display(self.widgets)
        self.handle = display(self.figure(), display_id=True)
        return self


def _draw_timeline(run, ax) -> None:
    from sim.plots import lease_timeline

    lease_timeline(run, ax, window=busy_window(run))


def explore(
    make_run: Callable[..., object],
    controls: Iterable[Control | tuple],
    *,
    draw: Callable | None = None,
    figsize: tuple[float, float] = (12.0, 3.6),
    headless: bool | None = None,
) -> Explorer:
    """Sliders that re-run a small scenario and redraw its figure (by default its lease timeline).

    controls: Control objects or tuples (name, low, high, step, value[, label]); make_run receives
    the values as keyword arguments. Headless (no widget frontend) it runs once with the values
    given and shows the figure as a static image.
    """
    parsed = [c if isinstance(c, Control) else Control(*c) for c in controls]
    return Explorer(make_run, parsed, draw=draw, figsize=figsize).show(headless)
