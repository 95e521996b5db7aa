"""Helpers of the contract suite: a scripted set of clients on one backend, expected rows."""

from __future__ import annotations

from sim.db.queries import QUERY_DEFAULTS, get_query

CLIENTS = ("A", "B", "C", "W")  # W: the watcher / observer, never in a transaction


def payload(job_id: int) -> str:
    return f'{{"amount_cents": {100 * job_id}, "currency": "EUR"}}'


def job_row(
    job_id,
    status="Pending",
    owner=None,
    until=None,
    attempts=0,
    heartbeat=None,
    created=0.0,
    completed=None,
    error=None,
) -> tuple:
    """The expected dump_jobs row of a job inserted by Script.add_jobs."""
    return (
        job_id,
        f"e{job_id}",
        payload(job_id),
        status,
        owner,
        until,
        attempts,
        heartbeat,
        created,
        completed,
        error,
    )


class Script:
    """Drives one backend with named clients: `db.run("A", "claim_conditional", id=1, ...)`."""

    def __init__(self, backend):
        self.backend = backend
        for client in CLIENTS:
            backend.connect(client)

    def run(self, client: str, query: str, **params):
        """Execute; the attempts cap and retry backoff default to Policy's (25 attempts, no
        backoff)."""
        names = get_query(query).param_names
        for name, value in QUERY_DEFAULTS.items():
            if name in names:
                params.setdefault(name, value)
        return self.backend.execute(client, query, params)

    def add_jobs(self, *ids: int, now: float = 0.0) -> None:
        for job_id in ids:
            assert (
                self.run(
                    "W",
                    "insert_job",
                    id=job_id,
                    event_id=f"e{job_id}",
                    payload=payload(job_id),
                    now=now,
                )
                == []
            )

    def claim(self, client: str, job_id: int, now: float, until: float):
        return self.run(
            client, "claim_conditional", id=job_id, owner=client, now=now, lease_until=until
        )

    def jobs(self) -> list[tuple]:
        return self.run("W", "dump_jobs")

    def ledger(self) -> list[tuple]:
        return self.run("W", "dump_ledger")

    def markers(self) -> list[tuple]:
        return self.run("W", "dump_processed_events")

    def __getattr__(self, name):  # begin, commit, rollback, resume, crash, ... of the backend
        return getattr(self.backend, name)
