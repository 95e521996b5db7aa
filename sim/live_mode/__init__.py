"""Live mode: real worker processes, a watcher and a producer on real PostgreSQL, on the wall clock.

    # a LiveRun: r.summary, sim.check(r)
    r = sim.live("crash-recovery", duration=60, time_scale=0.05)
    # live against 20 simulated seeds
    print(sim.compare(r, 20))

Modules, one job each: clock (the one clock of a run), recorder (records that survive SIGKILL),
slots (what each worker holds, in shared memory), connection (named statements on a connection),
plan (the job catalog from the seeded streams), driver (sim.protocol's steps as blocking calls),
worker / watcher / producer (the child processes' life cycles, started by process and roles), faults
(the fault schedule as signal actions), children (the runner's child processes), fault_play
(crashes, pauses and restarts as the run plays them), budget (which time scales are honest),
repair (records a kill cut off), result (LiveRun), runner (sim.live), settings (the issue's
hand-built check). Names are loaded on first use, so that a child process imports only what it runs.
"""

from __future__ import annotations

import importlib

_EXPORTS = {
    "LiveError": "sim.live_mode.children",
    "LiveRun": "sim.live_mode.result",
    "live": "sim.live_mode.runner",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'sim.live_mode' has no attribute {name!r}")
