"""sim.hunt: search the fault schedules of a queue for the shortest timeline that breaks it.

space (the scope and one schedule) -> strategies (grid, swarm, PCT) -> search (budget, processes)
-> runner (the hot path; replays judged by sim.check) -> shrink -> handback (scenario file,
timeline, account, pytest, PostgreSQL replay) -> certificate; api holds sim.hunt() itself.
"""

from sim.hunting.api import HuntResult, hunt

__all__ = ["HuntResult", "hunt"]
