"""What a user's queue statements may cost a run, and what their failures say: the rows Lease Lab
reads from one statement are capped (a statement returning millions of rows is stopped, not read),
all their time together is bounded (sim.db.queue.sandbox.TimeBudget), and every error the server
raised for one of them is counted with its SQLSTATE, message and file:line, so that a run whose
statements fail is never reported as clean.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sim.db.queue.sandbox import TimeBudget
from sim.errors import ConfigError

if TYPE_CHECKING:
    from sim.db.queue.directory import QueueDefinition

ROWS_PER_JOB = 10  # rows one statement may return, per job the run inserted ...
ROWS_FLOOR = 10_000  # ... plus this many


class TooManyRows(ConfigError):
    """A statement of the user's queue returned more rows than a run can have use for."""


class QueueGuard:
    """One run's bounds on a queue's statements and the tally of their errors."""

    def __init__(self, queue: QueueDefinition, budget: TimeBudget | None = None) -> None:
        self.queue = queue
        self.budget = budget if budget is not None else TimeBudget()
        self.inserted = 0  # insert_job statements sent: the jobs the run has
        self.expected = 0  # jobs another process inserts (live mode's producer)
        self.errors: dict[tuple[str, str, str], int] = {}  # (statement, SQLSTATE, message) -> n

    @property
    def row_cap(self) -> int:
        """Rows one statement may return: ROWS_PER_JOB per job inserted, plus ROWS_FLOOR."""
        return ROWS_PER_JOB * max(self.inserted, self.expected) + ROWS_FLOOR

    def too_many_rows(self, query: str) -> TooManyRows:
        return TooManyRows(
            f"{self.queue.where(query)}: {query}: returned more than {self.row_cap:,} rows (the "
            f"cap for a run of {max(self.inserted, self.expected):,} jobs: {ROWS_PER_JOB} per job "
            "plus "
            f"{ROWS_FLOOR:,}); it was cancelled"
        )

    def failed(self, query: str, sqlstate: str, message: str) -> None:
        """Count one error the server raised for statement `query`."""
        key = (query, sqlstate, message)
        self.errors[key] = self.errors.get(key, 0) + 1

    def ended(self, client: str, query: str, message: str) -> ConfigError | None:
        """The error for a client's connection that an administrator command ended (the server
        runs on: it answered): the queue's own SQL, calling pg_terminate_backend, is the one
        that may have done it. Named with the statements whose text calls it, else the one in
        flight."""
        if "administrator command" not in message:
            return None
        callers = self.queue.calling("pg_terminate_backend") or [self.queue.where(query)]
        return ConfigError(
            f"{', '.join(callers)}: the queue's SQL ended the run's own sessions "
            f"(pg_terminate_backend): client {client}'s connection was ended during {query} "
            f"({message}); a queue's SQL may not end Lease Lab's connections"
        )

    def settings_changed(self) -> ConfigError:
        """The error for a run whose role's (or database's) settings changed under it: only the
        queue's SQL, as the role, could have (ALTER ROLE ... SET, in a function)."""
        where = (
            self.queue.calling("alter role")
            or self.queue.calling("set_config")
            or [self.queue.file()]
        )
        return ConfigError(
            f"{', '.join(where)}: the queue's SQL changed the settings of the run's role or "
            "database during the run (ALTER ROLE ... SET, through a function), which every later "
            "connection of the run would take; a queue's SQL may not"
        )

    def report(self) -> list[dict[str, Any]]:
        """Each distinct error, most frequent first: statement, where, sqlstate, message,
        count."""
        return [
            {
                "statement": query,
                "where": self.queue.where(query),
                "sqlstate": sqlstate,
                "message": message,
                "count": n,
            }
            for (query, sqlstate, message), n in sorted(
                self.errors.items(), key=lambda item: (-item[1], item[0])
            )
        ]


def describe_errors(errors: list[dict[str, Any]]) -> list[str]:
    """One line per distinct statement error, as the run's text prints them."""
    return [
        f"{e['where']}: {e['statement']} failed {e['count']:,} time"
        f"{'s' if e['count'] != 1 else ''}: SQLSTATE {e['sqlstate']} {e['message']}"
        for e in errors
    ]
