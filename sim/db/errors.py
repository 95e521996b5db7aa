"""Errors the database layer raises: each names the query, the parameter or the host.

Each keeps its constructor's arguments in `args` (the message comes from __str__), so that
`type(e)(*e.args)` rebuilds it: SimPy does exactly that when an error escapes a process.
`user_error()` turns a psycopg error that escaped the backend into the CLI's one-line error.
"""

from __future__ import annotations

from sim.errors import ConfigError
from sim.protocol.failures import DatabaseError as DatabaseError
from sim.protocol.failures import DbUnavailable as DbUnavailable
from sim.protocol.failures import StatementError as StatementError


class UnknownQueryError(DatabaseError, LookupError):
    def __init__(self, name: str, suggestions: list[str]):
        super().__init__(name, suggestions)
        self.name, self.suggestions = name, suggestions

    def __str__(self) -> str:
        hint = f"; did you mean {self.suggestions[0]!r}?" if self.suggestions else ""
        return f"unknown query {self.name!r}{hint}"


class ParameterError(DatabaseError, TypeError):
    def __init__(self, query: str, param: str, problem: str):
        super().__init__(query, param, problem)
        self.query, self.param, self.problem = query, param, problem

    def __str__(self) -> str:
        return f"query {self.query}: parameter {self.param!r} {self.problem}"


class LockNotAvailableError(StatementError):
    sqlstate = "55P03"


class TransactionAbortedError(StatementError):
    sqlstate = "25P02"


class UniqueViolationError(StatementError):
    sqlstate = "23505"


class DeadlockDetectedError(StatementError):
    """The statement would close a cycle of lock waits; its transaction is rolled back."""

    sqlstate = "40P01"


class ClientCrashedError(DatabaseError):
    """A statement was sent on the connection of a client that has crashed."""

    def __init__(self, client: str, query: str):
        super().__init__(client, query)
        self.client, self.query = client, query

    def __str__(self) -> str:
        return f"client {self.client} has crashed: cannot run {self.query} before it reconnects"


class ClientStateError(DatabaseError):
    """Transaction control out of order (begin twice, commit without begin, unknown client)."""


class ServerUnavailableError(DatabaseError):
    """The PostgreSQL server cannot be reached or refuses us; the message names the host,
    never a password."""


class QueueDefinitionError(ConfigError):
    """A queue directory that cannot be used: one line naming file:line,
    the statement and the problem."""


def user_error(exc: BaseException) -> ConfigError | None:
    """A psycopg error that escaped the PostgreSQL backend, as the one-line user error the CLI
    prints ('PostgreSQL: <the server's message>'); None for any other exception."""
    if type(exc).__module__.startswith("psycopg"):
        return ConfigError(f"PostgreSQL: {str(exc).strip()}")
    return None


class StatementStuckError(DatabaseError):
    """A statement neither finished nor waited on another client's lock within the timeout."""


class ServerStatementError(StatementError):
    """Any other error PostgreSQL reported for a statement, with its own SQLSTATE."""

    def __init__(self, query: str, message: str, sqlstate: str):
        self.sqlstate = sqlstate
        super().__init__(query, message)
        self.args = (query, message, sqlstate)
