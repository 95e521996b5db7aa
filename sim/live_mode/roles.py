"""Build a child's role (worker, watcher or producer) from the runner's configuration."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from sim.db.queries import load_queries
from sim.live_mode.clock import LiveClock
from sim.live_mode.recorder import Recorder
from sim.live_mode.slots import Slots
from sim.scenario.settings import loads

if TYPE_CHECKING:  # the roles are imported where they run: a child loads only its own
    from sim.live_mode.producer import LiveProducer
    from sim.live_mode.watcher import LiveWatcher
    from sim.live_mode.worker import LiveWorker


def queries_for(config: dict) -> dict:
    """The named statements this run uses: the project's sql/, with a user's queue directory's
    statements in their place (--sql DIR; the runner has checked it on the server already)."""
    if config.get("sql_dir"):
        from sim.db.queue.directory import load_queue

        return load_queue(config["sql_dir"]).queries
    return load_queries()


def setup(config: dict):
    """Connect, and return the function that runs the role from the shared start t0."""
    scenario = loads(config["scenario"], "live scenario")
    clock = LiveClock(0.0, config["scale"])
    name = config["name"]
    recorder = Recorder(Path(config["folder"]) / f"{name}-{config['spare']}.jsonl", clock)
    common: dict[str, Any] = dict(
        dsn=config["dsn"],
        schema=config["schema"],
        queries=queries_for(config),
        clock=clock,
        recorder=recorder,
    )
    if config["role"] == "worker":
        from sim.live_mode.worker import LiveWorker

        slots = Slots(config["slots"], scenario.policy.workers)
        role: LiveWorker | LiveWatcher | LiveProducer = LiveWorker(
            scenario, config["index"], slots=slots, **common
        )
    elif config["role"] == "watcher":
        from sim.live_mode.watcher import LiveWatcher

        role = LiveWatcher(scenario, **common)
    elif config["role"] == "producer":
        from sim.live_mode.producer import LiveProducer

        role = LiveProducer(scenario, **common)
    else:
        raise ValueError(f"unknown live role {config['role']!r}")
    role.prepare()

    def start(t0: float, incarnation: int, start_at: float) -> None:
        clock.t0 = t0
        clock.sleep_until(
            0.0
        )  # everyone begins at the common start, not when its start line arrived
        role.lifecycle(incarnation, start_at)

    return start
