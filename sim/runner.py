"""sim.run(): one scenario, one seed, one backend -> a Run with its event log and final tables."""

from __future__ import annotations

from sim.db.base import Backend
from sim.db.memory import MemoryBackend
from sim.errors import ConfigError
from sim.model.world import build, run_to_horizon
from sim.results import Run
from sim.scenario import Scenario, as_scenario


def make_backend(kind: str | Backend = "memory", *, dsn: str | None = None, keep_schema: bool = False) -> Backend:
    """A fresh backend: 'memory' (the simulated Postgres) or 'postgres' (embedded, or the DSN's server)."""
    if not isinstance(kind, str) and callable(getattr(kind, "execute", None)):
        return kind  # a Backend object (duck-typed: test doubles and recorders need not subclass)
    if not isinstance(kind, str):
        raise ConfigError(f"backend: expected 'memory', 'postgres' or a Backend, got {type(kind).__name__} {kind!r}")
    if dsn is not None and not isinstance(dsn, str):
        raise ConfigError(f"dsn: expected a connection string, got {type(dsn).__name__}")
    if kind == "memory":
        return MemoryBackend()
    if kind == "postgres":
        from sim.db.postgres import PostgresBackend

        return PostgresBackend(dsn, keep_schema=keep_schema)
    raise ConfigError(f"backend: {kind!r} is not one of memory, postgres")


def run(scenario: Scenario | str, backend: str | Backend | None = None, *, seed: int | None = None,
        dsn: str | None = None, keep_schema: bool = False, progress: bool | None = None, **overrides) -> Run:
    """Simulate `scenario` (a Scenario, preset name or TOML path) to its horizon.

    `overrides` are dotted keys, e.g. run("baseline", seed=3, **{"policy.lease_ttl": 20}).
    The backend defaults to the scenario's own setting.
    """
    scenario = as_scenario(scenario)
    for name, value in (("keep_schema", keep_schema), ("progress", progress)):
        if not (isinstance(value, bool) or (name == "progress" and value is None)):
            raise ConfigError(f"{name}: expected True or False, got {type(value).__name__} {value!r}")
    if overrides:
        scenario = scenario.with_overrides(overrides)
    if seed is not None:
        scenario = scenario.replace(seed=seed)
    db = make_backend(scenario.backend if backend is None else backend, dsn=dsn, keep_schema=keep_schema)
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
    kept = getattr(db, "schema", None) if getattr(db, "keep_schema", False) else None
    return Run(scenario, world.log, dict(world.statement_counts), tables, skews, wall, db.name, kept)
