"""Lease Lab: simulate database-backed job queues that hand out work by leases.

import sim
r = sim.run("crash-recovery", seed=1)
r.summary, r.events, r.leases, r.jobs
sim.check(r)
sim.sweep("crash-recovery", {"policy.watcher_interval": [5, 30]}, replications=10).aggregate()
print(sim.advise("durations.csv", pause_rate=2))
print(sim.review("baseline"))          # the design-review checklist, with measured evidence
print(sim.review("gc-pause-zombie", sql="myqueue/"))  # ... of YOUR queue's SQL, on real PostgreSQL
sim.compare_peers(seeds=range(1, 4))   # River, Oban, graphile-worker, pg-boss, Solid Queue, SQS
r = sim.live("crash-recovery", duration=60, time_scale=0.05)   # real processes on PostgreSQL
print(sim.compare(r, 20))              # live against 20 simulated seeds
"""

from sim import report  # noqa: F401  (registers the writers of Review.save_report and Advice.save_report)
from sim.advisor import Advice, advise
from sim.comparison import Comparison, compare
from sim.dists import Dist
from sim.invariants import check
from sim.live import LiveRun, live
from sim.peers import compare_peers
from sim.review import Review, review
from sim.runner import make_backend, run
from sim.scenario import Faults, Policy, Scenario, Workload, preset, preset_names
from sim.sweep import SweepResult, sweep

__version__ = "0.1.0"
__all__ = [
    "Advice",
    "Comparison",
    "Dist",
    "Faults",
    "LiveRun",
    "Policy",
    "Review",
    "Scenario",
    "SweepResult",
    "Workload",
    "advise",
    "check",
    "compare",
    "compare_peers",
    "live",
    "make_backend",
    "preset",
    "preset_names",
    "review",
    "run",
    "sweep",
]
