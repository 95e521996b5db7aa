"""The Backend protocol the model talks to, the client bookkeeping both backends share, and the
simulated clock's mapping to timestamptz (sim.protocol.timestamps, named here too).

A statement either returns its rows (a list of tuples, times as float seconds) or a `Blocked`
marker when it waits on a row lock held by another client's open transaction. The caller
(a SimPy process) waits in simulated time until that holder commits, rolls back or crashes,
then calls `resume(client)` to get the statement's real outcome (rows, or Blocked again).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Generic, Protocol, TypeVar, final, runtime_checkable

from sim.db.errors import ClientCrashedError, ClientStateError
from sim.protocol.timestamps import EPOCH as EPOCH
from sim.protocol.timestamps import MICROS as MICROS
from sim.protocol.timestamps import from_timestamp as from_timestamp
from sim.protocol.timestamps import to_micros as to_micros
from sim.protocol.timestamps import to_timestamp as to_timestamp

Rows = list[tuple[Any, ...]]


class JobState(StrEnum):
    """A job row's status column. The values are the strings PostgreSQL stores, so that logs,
    DataFrames and SQL read the same; a member compares and hashes equal to its string."""

    PENDING = "Pending"
    PROCESSING = "Processing"
    COMPLETED = "Completed"
    DEAD = "Dead"


@final  # the model tells a blocked statement by type(outcome) is Blocked
@dataclass(frozen=True, slots=True)
class Blocked:
    """A statement of `client` is waiting for the transaction of `holder` to end."""

    client: str
    query: str
    holder: str


@runtime_checkable
class Backend(Protocol):
    """One simulated database shared by many clients (connections), at READ COMMITTED."""

    name: str

    def connect(self, client: str) -> None:
        """Open (or reopen after a crash) the connection of `client`."""

    def execute(self, client: str, query: str, params: dict[str, Any]) -> Rows | Blocked:
        """Run the named query for `client`, in its open transaction or in autocommit."""

    def resume(self, client: str) -> Rows | Blocked:
        """Continue the statement of `client` that returned Blocked, once its holder has ended."""

    def begin(self, client: str) -> None: ...

    def commit(self, client: str) -> None:
        """Commit; committing a transaction aborted by an error rolls it back,
        as PostgreSQL does."""

    def rollback(self, client: str) -> None: ...

    def crash(self, client: str) -> None:
        """The client dies: its open transaction rolls back, its locks are released at once."""

    def in_transaction(self, client: str) -> bool: ...

    def close(self) -> None:
        """Release everything the backend holds (connections, schema unless kept)."""


class ClientState(Protocol):
    """What ClientTable reads of a client's state."""

    crashed: bool


ClientT = TypeVar("ClientT", bound=ClientState)


class ClientTable(Generic[ClientT]):
    """Connect and look up clients, shared by MemoryBackend and PostgresBackend: `_clients` maps a
    client name to its state, a `_new_client()` object with a `crashed` flag."""

    _clients: dict[str, ClientT]
    _new_client: type[ClientT]

    def connect(self, client: str) -> None:
        """Open (or reopen after a crash) the connection of `client`."""
        state = self._clients.get(client)
        if state is not None and not state.crashed:
            raise ClientStateError(f"client {client} is already connected")
        self._clients[client] = self._new_client()

    def _client(self, client: str, query: str) -> ClientT:
        """The state of a connected, live client (for a statement `query`)."""
        state = self._clients.get(client)
        if state is None:
            raise ClientStateError(f"client {client} is not connected (call connect first)")
        if state.crashed:
            raise ClientCrashedError(client, query)
        return state
