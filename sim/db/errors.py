"""Errors the database layer raises: each names the query, the parameter or the host."""

from __future__ import annotations


class DatabaseError(Exception):
    """Base class for Lease Lab database errors."""


class UnknownQueryError(DatabaseError, LookupError):
    def __init__(self, name: str, suggestions: list[str]):
        hint = f"; did you mean {suggestions[0]!r}?" if suggestions else ""
        super().__init__(f"unknown query {name!r}{hint}")
        self.name = name


class ParameterError(DatabaseError, TypeError):
    def __init__(self, query: str, param: str, problem: str):
        super().__init__(f"query {query}: parameter {param!r} {problem}")
        self.query, self.param = query, param


class StatementError(DatabaseError):
    """A statement failed on the server side; `sqlstate` is PostgreSQL's code."""

    sqlstate = ""

    def __init__(self, query: str, message: str):
        super().__init__(f"query {query}: {message} (SQLSTATE {self.sqlstate})")
        self.query = query


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
        super().__init__(f"client {client} has crashed: cannot run {query} before it reconnects")
        self.client, self.query = client, query


class ClientStateError(DatabaseError):
    """Transaction control out of order (begin twice, commit without begin, unknown client)."""


class ServerUnavailableError(DatabaseError):
    """The PostgreSQL server cannot be reached or refuses us; the message names the host, never a password."""
