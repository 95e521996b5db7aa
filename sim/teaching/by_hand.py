"""The database by hand: `Script` drives a Backend statement by statement with a transcript;
`Delivery` is seed 2's dedup transaction, one step at a time."""

from __future__ import annotations

import json

import pandas as pd

from sim.db.base import Backend, Blocked
from sim.db.inspect import TABLE_COLUMNS
from sim.db.queries import QUERY_DEFAULTS, get_query
from sim.errors import ConfigError
from sim.payload import payload_hash
from sim.protocol import bind_clock
from sim.support.in_words import count


class Script:
    """Drive a Backend by hand, statement by statement, and keep a transcript.

        s = Script()                       # a fresh simulated PostgreSQL
        s = Script(PostgresBackend())      # or a real one
        s.connect("A", "B")
        s.at(1.0).sql("A", "insert_job", id=1, event_id="evt-1", payload="{}")
        s.sql("A", "claim_conditional", id=1, owner="A", ttl=30)
        s.transcript                       # step, t, client, statement, result

    Time parameters: `now` is the script's clock (at()); `ttl=` fills lease_until = now + ttl.
    A statement that waits on another client's lock returns Blocked; commit or roll back the
    holder, then resume() the waiter.
    """

    def __init__(self, db: Backend | None = None, clock: float = 0.0):
        if db is None:
            from sim.db.memory import MemoryBackend

            db = MemoryBackend()
        self.db = db
        self.now = float(clock)
        self.rows: list[dict] = []
        self._connected: set[str] = set()

    def at(self, t: float) -> Script:
        self.now = float(t)
        return self

    def connect(self, *clients: str) -> Script:
        for client in clients:
            self.db.connect(client)
            self._connected.add(client)
        return self

    def _record(self, client: str, statement: str, result) -> None:
        if isinstance(result, Blocked):
            text = f"waits for {result.holder}'s transaction"
        elif isinstance(result, list):
            text = count(len(result), "row") + (f": {_short(result)}" if result else "")
        else:
            text = str(result)
        self.rows.append(
            {
                "step": len(self.rows) + 1,
                "t": self.now,
                "client": client,
                "statement": statement,
                "result": text,
            }
        )

    def sql(self, client: str, query: str, *, ttl: float | None = None, **params):
        """Run the named query (sql/queries.sql) for `client`; returns rows or Blocked."""
        q = get_query(query)
        if q.uses_clock:
            bind_clock(
                params,
                params.get("now", self.now),
                float(ttl) if ttl is not None and "lease_until" in q.param_names else None,
            )
        for (
            name,
            value,
        ) in QUERY_DEFAULTS.items():  # Policy's defaults: 25 attempts, no retry backoff
            if name in q.param_names:
                params.setdefault(name, value)
        if client not in self._connected:
            self.connect(client)
        result = self.db.execute(client, query, params)
        self._record(client, query, result)
        return result

    def begin(self, client: str) -> None:
        if client not in self._connected:
            self.connect(client)
        self.db.begin(client)
        self._record(client, "BEGIN", "ok")

    def commit(self, client: str) -> None:
        self.db.commit(client)
        self._record(client, "COMMIT", "ok")

    def rollback(self, client: str) -> None:
        self.db.rollback(client)
        self._record(client, "ROLLBACK", "ok")

    def crash(self, client: str) -> None:
        """The client dies: its transaction rolls back, its locks go; it reconnects on next use."""
        self.db.crash(client)
        self._connected.discard(client)
        self._record(client, "(crash)", "connection gone: open transaction rolled back")

    def resume(self, client: str):
        result = self.db.resume(client)
        self._record(client, "(resumes)", result)
        return result

    def table(self, name: str) -> pd.DataFrame:
        """The committed contents of jobs, ledger or processed_events."""
        if name not in TABLE_COLUMNS:
            raise ConfigError(f"table: {name!r} is not one of {', '.join(TABLE_COLUMNS)}")
        if "_inspector" not in self._connected:
            self.connect("_inspector")
        return pd.DataFrame(
            self.db.execute("_inspector", f"dump_{name}", {}), columns=TABLE_COLUMNS[name]
        )

    @property
    def transcript(self) -> pd.DataFrame:
        return pd.DataFrame(
            self.rows, columns=["step", "t", "client", "statement", "result"]
        ).set_index("step")

    def close(self) -> None:
        self.db.close()


def _short(rows: list, limit: int = 3) -> str:
    shown = ", ".join(
        str(tuple(round(v, 3) if isinstance(v, float) else v for v in r)) for r in rows[:limit]
    )
    return shown + (", ..." if len(rows) > limit else "")


class Delivery:
    """One delivery of an event, handled with seed 2's transaction on a Script's client:

        BEGIN;
        INSERT INTO processed_events ... ON CONFLICT DO NOTHING RETURNING event_id;
        -- a row back: apply the effect (a ledger row); none: a duplicate (or another payload)
        COMMIT;

    start() runs BEGIN and the marker insert ("claimed", "duplicate", "rejected" or "waiting" when
    another delivery of the same event holds the uncommitted marker); finish() resumes a waiting
    insert, applies the effect when claimed and commits. crash() kills the client mid-way.
    """

    def __init__(
        self,
        script: Script,
        client: str,
        event_id: str,
        *,
        amount_cents: int = 1000,
        payload: str | None = None,
        job_id: int = 1,
        attempt: int = 1,
    ):
        self.script, self.client, self.event_id = script, client, event_id
        self.amount_cents, self.job_id, self.attempt = amount_cents, job_id, attempt
        self.payload = (
            payload
            if payload is not None
            else json.dumps({"event_id": event_id, "amount_cents": amount_cents})
        )
        self.state = "new"

    def start(self) -> str:
        self.script.begin(self.client)
        rows = self.script.sql(
            self.client,
            "insert_dedup_marker",
            event_id=self.event_id,
            payload_hash=payload_hash(self.payload),
        )
        return self._after_marker(rows)

    def _after_marker(self, rows) -> str:
        if isinstance(rows, Blocked):
            self.state = "waiting"
        elif rows:
            self.state = "claimed"
        else:
            stored = self.script.sql(self.client, "read_dedup_marker", event_id=self.event_id)
            self.state = (
                "rejected" if stored and stored[0][1] != payload_hash(self.payload) else "duplicate"
            )
        return self.state

    def finish(self) -> str:
        """Resume if waiting, apply the effect if claimed, commit (roll back a rejected payload)."""
        if self.state == "waiting":
            self._after_marker(self.script.resume(self.client))
            if self.state == "waiting":
                return self.state
        if self.state == "claimed":
            self.script.sql(
                self.client,
                "insert_ledger_entry",
                job_id=self.job_id,
                event_id=self.event_id,
                amount_cents=self.amount_cents,
                worker=self.client,
                attempt=self.attempt,
            )
            self.script.commit(self.client)
            self.state = "applied"
        elif self.state == "duplicate":
            self.script.commit(self.client)
            self.state = "skipped"
        elif self.state == "rejected":
            self.script.rollback(self.client)
            self.state = "rejected"
        else:
            raise ConfigError(
                f"delivery {self.event_id} by {self.client}: cannot finish from state "
                f"{self.state!r}"
            )
        return self.state

    def crash(self) -> str:
        self.script.crash(self.client)
        self.state = "crashed"
        return self.state

    def start_and_finish(self) -> str:
        """start() then finish(): the whole delivery, with no other client in between."""
        self.start()
        return self.finish()


def deliver(script: Script, client: str, event_id: str, **kwargs) -> str:
    """Deliver an event once, start to finish: 'applied', 'skipped' or 'rejected'."""
    return Delivery(script, client, event_id, **kwargs).start_and_finish()


def ledger_counts(script: Script) -> pd.Series:
    """Ledger rows per event id (the stored effect)."""
    ledger = script.table("ledger")
    return ledger.groupby("event_id").size().rename("ledger_rows")
