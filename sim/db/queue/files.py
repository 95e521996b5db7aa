"""The files of a queue directory, and the one-line error a bad one gets (naming file:line and
the statement): shared by the parsing of its text (sim.db.queue.directory) and its check on a server
(sim.db.queue.preflight)."""

from __future__ import annotations

from typing import NoReturn

from sim.db.errors import QueueDefinitionError

QUERIES_FILE = "queries.sql"
SCHEMA_FILE = "schema.sql"
SETTINGS_FILE = "queue.toml"


def fail_at(file: str, line: int, name: str, problem: str) -> NoReturn:
    raise QueueDefinitionError(f"{file}:{line}: {name}: {problem}")
