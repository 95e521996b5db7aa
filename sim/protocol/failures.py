"""The failures a statement can end in, as the protocol and its drivers see them: the database
unreachable (a partition), a statement refused by the server. The backends' own errors
(sim.db.errors) derive from these, so the protocol needs nothing from sim.db."""

from __future__ import annotations


class DatabaseError(Exception):
    """Base class for Lease Lab database errors."""


class StatementError(DatabaseError):
    """A statement failed on the server side; `sqlstate` is PostgreSQL's code."""

    sqlstate = ""

    def __init__(self, query: str, message: str):
        super().__init__(query, message)
        self.query, self.message = query, message

    def __str__(self) -> str:
        return f"query {self.query}: {self.message} (SQLSTATE {self.sqlstate})"


class DbUnavailable(Exception):
    """A client cannot reach the database (a partition): its connection is lost, and what it had
    open was rolled back. Not a DatabaseError: the protocol handles it as a fault, not a bug."""
