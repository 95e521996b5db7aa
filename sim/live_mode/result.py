"""LiveRun: a Run (same event log, metrics, plots and checks) plus what only a live run knows."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from sim.live_mode.budget import Measured
from sim.results import Run


@dataclass(repr=False)
class LiveRun(Run):
    time_scale: float = 1.0
    statement_seconds: pd.DataFrame = field(  # every statement sent during the run
        default_factory=lambda: pd.DataFrame(columns=["t", "name", "seconds"])
    )
    runner_lag: np.ndarray = field(  # wall seconds late, per fault action
        default_factory=lambda: np.zeros(0)
    )
    restart_lags: np.ndarray = field(  # scenario seconds late, per restart of a killed worker
        default_factory=lambda: np.zeros(0)
    )
    guard: Measured | None = None  # what the time-scale guard measured before the run
    unsound: list[str] = field(
        default_factory=list
    )  # delays past their bound (sim.live_mode.budget)
    repaired: list[str] = field(
        default_factory=list
    )  # records rebuilt from the tables (kills racing commits)
    incidents: list[str] = field(default_factory=list)  # worker processes that died on their own
    # statements still in flight when the run ended (a claim that hangs, say): the run cannot
    # say what they would have done, so it is inconclusive (the command exits 1)
    inconclusive: list[str] = field(default_factory=list)
    folder: str = ""

    def __repr__(self) -> str:
        return (
            f"LiveRun({self.scenario.name!r}, horizon={self.scenario.horizon:g}s, "
            f"scale={self.time_scale:g}, events={len(self.log)})"
        )

    @property
    def sound(self) -> bool:
        """Live mode's own delays stayed within their bounds throughout (see `unsound`)."""
        return not self.unsound
