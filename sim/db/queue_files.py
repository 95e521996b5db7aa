"""The files of a queue directory, and the one-line error a bad one gets (naming file:line and
the statement): shared by the parsing of its text (sim.db.queue_dir) and its check on a server
(sim.db.queue_check)."""

from __future__ import annotations

from sim.errors import ConfigError

QUERIES_FILE = "queries.sql"
SCHEMA_FILE = "schema.sql"
SETTINGS_FILE = "queue.toml"


class QueueDefinitionError(ConfigError):
    """A queue directory that cannot be used: one line naming file:line, the statement and the problem."""


def fail_at(file: str, line: int, name: str, problem: str):
    raise QueueDefinitionError(f"{file}:{line}: {name}: {problem}")
