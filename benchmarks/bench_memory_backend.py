"""MemoryBackend cost per statement at 10k and at 1M jobs; budget: 1M/10k <= 1.3 per statement.

The table is shaped like a long-running payment queue: ids in arrival order, the oldest 89 %
Completed, then 1 % in flight (leases that outlive the benchmark), then a 10 % Pending backlog.
Each round claims a batch (claim_skip_locked, then claim_conditional on ids from
select_candidates), renews and completes it, enqueues as many new jobs, and runs the watcher
(requeue_expired) on a few leases that have just lapsed. The table keeps its shape while it is
measured. Costs are per statement (per watcher call), the median over rounds; the two sizes
take turns in blocks of rounds (--quick: a third of the rounds). Prints one JSON object
(benchmarks/figures.py).
"""

from __future__ import annotations

import statistics
import time

from figures import emit, figure, quick

from sim.db.memory import MemoryBackend
from sim.db.queries import QUERY_DEFAULTS, get_query

SIZES = (10_000, 1_000_000)
BUDGET = 1.3
COMPLETED_SHARE, PROCESSING_SHARE = 0.89, 0.01
ROUNDS, QUICK_ROUNDS = 60, 20
BATCH = 200  # per round: BATCH claims of each kind, heartbeats and completions
BLOCK = 5  # consecutive rounds on one size before the other size's turn
WATCHER_CALLS, EXPIRED = 20, 5  # per round: watcher calls, each finding EXPIRED lapsed leases
TTL, TICK = 30.0, 0.001  # lease length; simulated seconds between statements
MAX_ATTEMPTS = 25


def _with_defaults(query: str, params: dict) -> dict:
    """The attempts cap and retry backoff the bench does not vary: Policy's defaults."""
    names = get_query(query).param_names
    return {**{k: v for k, v in QUERY_DEFAULTS.items() if k in names}, **params}


OPS = ("claim_skip_locked", "claim_conditional", "heartbeat", "complete_fenced", "requeue_expired")
CLIENT = "w1"


class Bench:
    def __init__(self, n: int):
        self.db = MemoryBackend()
        self.db.connect(CLIENT)
        self.now = 0.0
        self.next_id = 0
        self.seconds: dict[str, list[float]] = {op: [] for op in OPS}
        started = time.perf_counter()
        self.load(n)
        self.load_seconds = time.perf_counter() - started

    def tick(self) -> float:
        """Advance the simulated clock to the next statement's time."""
        self.now += TICK
        return self.now

    def run(self, query: str, **params) -> list[tuple]:
        return self.db.execute(CLIENT, query, _with_defaults(query, params))

    def timed(self, query: str, **params) -> list[tuple]:
        params = _with_defaults(query, params)
        started = time.perf_counter()
        rows = self.db.execute(CLIENT, query, params)
        self.seconds[query][-1] += time.perf_counter() - started
        return rows

    def enqueue(self, count: int) -> None:
        for _ in range(count):
            job_id, self.next_id = self.next_id, self.next_id + 1
            event_id = f"evt-{job_id}"
            self.run("insert_job", id=job_id, event_id=event_id, payload="{}", now=self.tick())

    def load(self, n: int) -> None:
        """Build the table through the named statements, as a real run would."""
        self.enqueue(n)
        completed, in_flight = int(n * COMPLETED_SHARE), int(n * PROCESSING_SHARE)
        for job_id in range(completed + in_flight):
            now = self.tick()
            lease_until = now + (TTL if job_id < completed else 1e6)  # in flight: outlives the run
            self.run("claim_conditional", id=job_id, owner="old", now=now, lease_until=lease_until)
            if job_id < completed:
                self.run("complete_fenced", id=job_id, owner="old", attempt=1, now=self.tick())

    def round(self) -> None:
        for op in OPS:
            self.seconds[op].append(0.0)
        held = []
        for _ in range(BATCH):
            now = self.tick()
            held += self.timed(
                "claim_skip_locked", owner=CLIENT, now=now, lease_until=now + TTL, take_expired=True
            )
        candidates = self.run("select_candidates", now=self.tick(), take_expired=True, limit=BATCH)
        for job_id, *_ in candidates:
            now = self.tick()
            held += self.timed(
                "claim_conditional", id=job_id, owner=CLIENT, now=now, lease_until=now + TTL
            )
        assert len(held) == 2 * BATCH, len(held)
        for job_id, attempt in held:
            now = self.tick()
            lease_until = now + TTL
            self.timed(
                "heartbeat",
                id=job_id,
                owner=CLIENT,
                attempt=attempt,
                now=now,
                lease_until=lease_until,
            )
        for job_id, attempt in held:
            self.timed("complete_fenced", id=job_id, owner=CLIENT, attempt=attempt, now=self.tick())
        self.enqueue(len(held))
        for _ in range(WATCHER_CALLS):
            for _ in range(EXPIRED):  # leases of crashed workers, lapsing before the next tick
                now = self.tick()
                lapse = now + TICK / 2
                self.run(
                    "claim_skip_locked",
                    owner="crashed",
                    now=now,
                    lease_until=lapse,
                    take_expired=False,
                )
            requeued = self.timed(
                "requeue_expired", now=self.tick(), max_attempts=MAX_ATTEMPTS, limit=100
            )
            assert len(requeued) == EXPIRED, requeued

    def micros_per_op(self) -> dict[str, float]:
        calls = {op: 2 * BATCH if op in ("heartbeat", "complete_fenced") else BATCH for op in OPS}
        calls["requeue_expired"] = WATCHER_CALLS
        return {
            op: round(statistics.median(s) / calls[op] * 1e6, 2) for op, s in self.seconds.items()
        }


def main() -> None:
    started = time.perf_counter()
    benches = {n: Bench(n) for n in SIZES}
    rounds = QUICK_ROUNDS if quick() else ROUNDS
    for _ in range(rounds // BLOCK):  # sizes take turns, so a burst of other load hits both
        for bench in benches.values():
            for _ in range(BLOCK):
                bench.round()
    sizes = {
        n: {"load_seconds": round(b.load_seconds, 2), "us_per_op": b.micros_per_op()}
        for n, b in benches.items()
    }
    small, large = (sizes[n]["us_per_op"] for n in SIZES)
    figures = [
        figure(
            f"{op}_1m_over_10k",
            large[op] / small[op],
            unit="x",
            goal=BUDGET,
            floor="the same statement on a 10k-job table",
            floor_value=small[op],
            floor_unit="us",
        )
        for op in OPS
    ]
    emit(
        "memory_backend",
        figures,
        table={
            "completed": COMPLETED_SHARE,
            "processing": PROCESSING_SHARE,
            "pending": round(1 - COMPLETED_SHARE - PROCESSING_SHARE, 2),
            "expired_per_watcher_call": EXPIRED,
        },
        rounds=rounds,
        sizes={str(n): v for n, v in sizes.items()},
        within_budget=all(f["met"] for f in figures),
        seconds=round(time.perf_counter() - started, 1),
    )


if __name__ == "__main__":
    main()
