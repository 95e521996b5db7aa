"""Live mode: real worker processes, a watcher and a producer on real PostgreSQL, on the wall clock.

    r = sim.live("crash-recovery", duration=60, time_scale=0.05)   # a LiveRun: r.summary, sim.check(r)
    sim.compare(r, seeds=20)                                       # live against the simulation

Modules, one job each: clock (the one clock of a run), recorder (records that survive SIGKILL),
slots (what each worker holds, in shared memory), connection (named statements on a connection),
plan (the job catalog from the seeded streams), worker / watcher / producer (the child processes,
started by process), faults (the fault schedule as signal actions), budget (which time scales are
honest), repair (records a kill cut off), result (LiveRun), runner (sim.live).
"""

from sim.live.result import LiveRun
from sim.live.runner import LiveError, live

__all__ = ["LiveError", "LiveRun", "live"]
