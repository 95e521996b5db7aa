"""Lease Lab: simulate database-backed job queues that hand out work by leases.

    import sim
    r = sim.run("crash-recovery", seed=1)
    r.summary, r.events, r.leases, r.jobs
    sim.check(r)
"""

from sim.dists import Dist
from sim.invariants import check
from sim.runner import make_backend, run
from sim.scenario import Faults, Policy, Scenario, Workload, preset, preset_names

__version__ = "0.1.0"
__all__ = ["Dist", "Faults", "Policy", "Scenario", "Workload", "check", "make_backend", "preset",
           "preset_names", "run"]
