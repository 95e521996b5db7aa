"""The live producer: enqueues each delivery at its time (the t = 0 batch before the start)."""

from __future__ import annotations

from sim.live_mode.connection import LiveConnection
from sim.live_mode.plan import job_plan
from sim.payload import payload_json


class LiveProducer:
    def __init__(self, scenario, *, dsn, schema, queries, clock, recorder):
        self.arrivals, self.catalog = job_plan(scenario)
        self.clock, self.recorder = clock, recorder
        self.db = LiveConnection(dsn, schema, "producer", queries, clock, recorder)
        self._loaded = 0

    def _enqueue(self, job: int, at: float | None) -> None:
        spec = self.catalog[job]
        self.db.execute(
            "insert_job",
            {
                "id": job,
                "event_id": spec.event_id,
                "payload": payload_json(spec.event_id, spec.amount_cents),
            },
            at=at,
        )
        t = self.clock.now() if at is None else at
        self.recorder.add(t, "enqueue", "producer", job, None, spec.event_id)

    def prepare(self) -> None:
        """Load the initial batch before anything runs, stamped t = 0 as in the model."""
        for t, job, _event in self.arrivals:
            if t > 0.0:
                break
            self._enqueue(job, 0.0)
            self._loaded += 1

    def lifecycle(self, _incarnation: int = 0, _start_at: float = 0.0) -> None:
        """Enqueue each arrival after t = 0 at its time (those at 0 were loaded by prepare)."""
        for t, job, _event in self.arrivals[self._loaded :]:
            self.clock.sleep_until(t)
            self._enqueue(job, None)
        self.db.close()
