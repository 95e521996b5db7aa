"""The files of a queue directory, and the one-line error a bad one gets (naming file:line and
the statement): shared by the parsing of its text (sim.db.queue_dir) and its check on a server
(sim.db.queue_check)."""

from __future__ import annotations

from sim.db.errors import QueueDefinitionError

QUERIES_FILE = "queries.sql"
SCHEMA_FILE = "schema.sql"
SETTINGS_FILE = "queue.toml"


def fail_at(file: str, line: int, name: str, problem: str):
    raise QueueDefinitionError(f"{file}:{line}: {name}: {problem}")
