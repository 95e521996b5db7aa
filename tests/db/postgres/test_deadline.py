"""The worker-side deadline held by a pause (issue #21 item 5) on both backends: the same log and
tables on MemoryBackend and on PostgreSQL, for the scripted pause and for the issue's run."""

from __future__ import annotations

import pytest

from sim.scenario.settings import preset
from tests.model.scripts import PAUSED, with_deadline

from .test_equivalence import assert_same, run_both

pytestmark = pytest.mark.postgres

PAUSED_DEADLINE = {  # name: (scenario, the end of w0's pause)
    "scripted pause": (with_deadline(faults=PAUSED), 12.0),
    "gc-pause-zombie, deadline 10": (
        preset("gc-pause-zombie").with_overrides({"policy.deadline": 10}),
        51.0,
    ),
}


@pytest.mark.parametrize("name", list(PAUSED_DEADLINE))
def test_a_deadline_held_by_a_pause_gives_the_same_run(pg_dsn, name):
    scenario, pause_end = PAUSED_DEADLINE[name]
    memory, postgres = run_both(scenario, pg_dsn)
    assert_same(memory, postgres)
    first = next(e for e in memory.log if e.kind == "deadline" and e.worker == "w0")
    assert pause_end < first.t < pause_end + 0.01  # the overdue deadline acts once w0 thaws
