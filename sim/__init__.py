"""Lease Lab: simulate database-backed job queues that hand out work by leases.

import sim
r = sim.run("crash-recovery", seed=1)
r.summary, r.events, r.leases, r.jobs
sim.check(r)
sim.sweep("crash-recovery", {"policy.watcher_interval": [5, 30]}, replications=10).aggregate()
print(sim.advise("sample", pause_rate=2))
print(sim.review("baseline"))          # the design-review checklist, with measured evidence
print(sim.review("gc-pause-zombie", sql="myqueue/"))  # ... of YOUR queue's SQL, on real PostgreSQL
sim.compare_peers(seeds=range(1, 4))   # River, Oban, graphile-worker, pg-boss, Solid Queue, SQS
r = sim.live("crash-recovery", duration=60, time_scale=0.05)   # real processes on PostgreSQL
print(sim.compare(r, 20))              # live against 20 simulated seeds
print(sim.hunt("read-then-write-race", time=10))  # the shortest schedule that breaks it

Names are loaded on first use (PEP 562), so `import sim` costs nothing until a name is used, and a
process that needs one module (a live worker, `python -m sim list`) imports only what that module
imports. Any module of the package is also an attribute: `sim.plots`, `sim.scenario`. No module
or folder of sim shares a name with a public function (sim.review lives in sim.checklist, sim.live
in sim.live_mode, sim.sweep in sim.sweeps), so `import sim.X` never hides one.
"""

from __future__ import annotations

import importlib
import importlib.util

__version__ = "0.1.0"

_EXPORTS = {  # public name -> the module that defines it
    "Advice": "sim.advice.advisor",
    "advise": "sim.advice.advisor",
    "Comparison": "sim.comparisons.live_vs_simulated",
    "compare": "sim.comparisons.live_vs_simulated",
    "Dist": "sim.scenario.dists",
    "check": "sim.invariants",
    "HuntResult": "sim.hunting",
    "hunt": "sim.hunting",
    "LiveRun": "sim.live_mode.result",
    "live": "sim.live_mode.runner",
    "compare_peers": "sim.comparisons.peers",
    "Run": "sim.results",
    "Review": "sim.checklist.design_review",
    "review": "sim.checklist.design_review",
    "make_backend": "sim.runner",
    "run": "sim.runner",
    "Faults": "sim.scenario.settings",
    "Policy": "sim.scenario.settings",
    "Scenario": "sim.scenario.settings",
    "Workload": "sim.scenario.settings",
    "preset": "sim.scenario.settings",
    "preset_names": "sim.scenario.settings",
    "SweepResult": "sim.sweeps",
    "sweep": "sim.sweeps",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name in _EXPORTS:
        value = getattr(importlib.import_module(_EXPORTS[name]), name)
        globals()[name] = value  # found directly from now on
        return value
    if not name.startswith("_") and importlib.util.find_spec(f"{__name__}.{name}") is not None:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
