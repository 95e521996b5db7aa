"""sim.run(): one scenario, one seed, one backend -> a Run with its event log and final tables."""

from __future__ import annotations

from sim.db.base import Backend
from sim.db.memory import MemoryBackend
from sim.model.world import build, run_to_horizon
from sim.results import Run
from sim.scenario import Scenario, resolve, validate


def make_backend(kind: str | Backend = "memory", *, dsn: str | None = None, keep_schema: bool = False) -> Backend:
    """A fresh backend: 'memory' (the simulated Postgres) or 'postgres' (embedded, or the DSN's server)."""
    if not isinstance(kind, str):
        return kind
    if kind == "memory":
        return MemoryBackend()
    if kind == "postgres":
        from sim.db.postgres import PostgresBackend

        return PostgresBackend(dsn, keep_schema=keep_schema)
    from sim.errors import ConfigError

    raise ConfigError(f"backend: {kind!r} is not one of memory, postgres")


def run(scenario: Scenario | str, backend: str | Backend | None = None, *, seed: int | None = None,
        dsn: str | None = None, keep_schema: bool = False, progress: bool | None = None, **overrides) -> Run:
    """Simulate `scenario` (a Scenario, preset name or TOML path) to its horizon.

    `overrides` are dotted keys, e.g. run("baseline", seed=3, **{"policy.lease_ttl": 20}).
    The backend defaults to the scenario's own setting.
    """
    if isinstance(scenario, str):
        scenario = resolve(scenario)
    else:
        scenario = validate(scenario)  # one built in code has not been checked yet
    if overrides:
        scenario = scenario.with_overrides(overrides)
    if seed is not None:
        scenario = scenario.replace(seed=seed)
    db = make_backend(backend or scenario.backend, dsn=dsn, keep_schema=keep_schema)
    owned = backend is None or isinstance(backend, str)
    try:
        world = build(scenario, db)
        wall = run_to_horizon(world, progress)
        db.connect("inspector")
        tables = {name: db.execute("inspector", f"dump_{name}", {})
                  for name in ("jobs", "ledger", "processed_events")}
    finally:
        if owned:
            db.close()
    skews = {w.name: w.db.skew for w in world.workers}
    return Run(scenario, world.log, dict(world.statement_counts), tables, skews, wall, db.name)
