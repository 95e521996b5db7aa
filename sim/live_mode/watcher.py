"""The live stuck watcher's life cycle: a tick of sim.protocol every watcher_interval, from a
random phase, on the shared clock."""

from __future__ import annotations

from sim.live_mode.connection import LiveConnection
from sim.live_mode.driver import LiveDriver
from sim.protocol import WatcherProtocol
from sim.protocol.streams import watcher_phase
from sim.support.rng import Streams


class LiveWatcher:
    def __init__(self, scenario, *, dsn, schema, queries, clock, recorder):
        self.policy = scenario.policy
        self.clock = clock
        self.db = LiveConnection(dsn, schema, "watcher", queries, clock, recorder)
        self.steps, self.driver = WatcherProtocol(self.policy), LiveDriver(clock, recorder)
        self.phase = watcher_phase(self.policy, Streams(scenario.seed).generator)

    def prepare(self) -> None:
        self.db.open()

    def lifecycle(self, _incarnation: int = 0, _start_at: float = 0.0) -> None:
        """Tick every watcher_interval from the watcher's phase until the runner kills it."""
        self.clock.sleep(self.phase)
        while True:
            self.driver.play(self.steps.tick(), self.db)
            self.clock.sleep(self.policy.watcher_interval)
