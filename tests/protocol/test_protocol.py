"""The lease protocol's statement sequences, driven by a scripted fake: every claim strategy,
completion (fenced, unfenced, dedup, payload conflict, refused), heartbeat, release, deadline
and the watcher tick, step by step, with the parameters each statement binds."""

from __future__ import annotations

import numpy as np
import pytest

from sim import protocol
from sim.db.errors import DbUnavailable, StatementError
from sim.db.queries import load_queries
from sim.live_mode.driver import LiveDriver
from sim.model.producer import JobCatalog
from sim.payload import payload_hash, payload_json
from sim.protocol import Lease, WatcherProtocol, WorkerProtocol, bind_clock
from sim.scenario.settings import CrashPoint, Faults
from tests.model.scripts import scripted

NOW = 100.0
NAMES = {  # the steps a trace shows by name, with their fields
    protocol.Work: ("work", "seconds"),
    protocol.Wait: ("wait", "seconds"),
    protocol.Delay: ("delay", "seconds"),
    protocol.steps.Begin: ("BEGIN",),
    protocol.steps.Commit: ("COMMIT",),
    protocol.steps.Rollback: ("ROLLBACK",),
    protocol.CrashAt: ("crash_point", "point"),
}
QUERIES = load_queries()


class Fake:
    """Drives protocol steps as a driver would: each statement must be the next one scripted,
    (name, rows) or (name, an error to throw in); the clock reads NOW; every step is traced."""

    def __init__(self, *answers, charge="new"):
        self.answers = list(answers)
        self.charge = charge
        self.trace: list[tuple] = []

    def play(self, steps):
        handlers = {
            protocol.Statement: self.statement,
            protocol.Record: lambda s: self.trace.append(
                ("record", s.kind, s.worker, s.job, s.attempt, s.detail)
            ),
            protocol.Charge: self.charged,
            protocol.steps.Now: lambda _: NOW,
        }
        for kind, (name, *fields) in NAMES.items():
            handlers[kind] = lambda s, name=name, fields=fields: self.trace.append(
                (name, *(getattr(s, f) for f in fields))
            )
        done = protocol.play(steps, handlers)
        assert self.answers == [], f"scripted statements left unused: {self.answers}"
        return done

    def statement(self, step):
        name, params = step.name, step.params
        if QUERIES[name].uses_clock:
            bind_clock(params, NOW, step.ttl)
        QUERIES[name].check(params)  # the parameters the statement declares, typed
        expected, answer = self.answers.pop(0)
        assert name == expected
        self.trace.append((name, dict(params)))
        if isinstance(answer, Exception):
            raise answer
        return answer

    def charged(self, step):
        self.trace.append(("charge", step.key))
        return self.charge


def worker(*, work=20.0, psp_at=0.5, faults=None, **policy) -> WorkerProtocol:
    scenario = scripted(work=work, psp_at=psp_at, faults=faults, **policy)
    catalog = JobCatalog()
    for event_no in range(1, 8):
        catalog.add(event_no, 1000 + event_no, work)
    return WorkerProtocol(
        "w0",
        scenario,
        catalog,
        psp_call=lambda: 0.25,
        hb_delay=lambda: 0.0,
        hb_loss=np.random.default_rng(0),
    )


def claim_params(**extra) -> dict:
    return {"owner": "w0", "max_attempts": 25, **extra}


# ---- claims --------------------------------------------------------------------------------------


def test_skip_locked_claims_in_one_statement_and_records_the_lease_it_wrote():
    fake = Fake(("claim_skip_locked", [(7, 3)]))
    lease = fake.play(worker(claim="skip_locked").poll())
    assert fake.trace == [
        (
            "claim_skip_locked",
            claim_params(take_expired=True, now=NOW, lease_until=NOW + 30),
        ),
        ("record", "claim", "w0", 7, 3, NOW + 30),
    ]
    assert (lease.job, lease.attempt, lease.until, lease.lost, lease.done) == (
        7,
        3,
        NOW + 30,
        False,
        False,
    )


def test_select_for_update_locks_then_writes_the_lease_in_one_transaction():
    fake = Fake(("lock_next_candidate", [(4,)]), ("claim_unconditional", [(4, 1)]))
    lease = fake.play(worker(claim="select_for_update", select_to_update_gap=0.5).poll())
    assert fake.trace == [
        ("BEGIN",),
        ("lock_next_candidate", {"take_expired": True, "max_attempts": 25, "now": NOW}),
        ("work", 0.5),  # select_to_update_gap: the process computes between read and write
        ("claim_unconditional", claim_params(id=4, now=NOW, lease_until=NOW + 30)),
        ("COMMIT",),
        ("record", "claim", "w0", 4, 1, NOW + 30),
    ]
    assert (lease.job, lease.attempt) == (4, 1)


def test_select_for_update_with_nothing_to_lock_commits_and_idles():
    fake = Fake(("lock_next_candidate", []))
    assert fake.play(worker(claim="select_for_update", poll_interval=2.0).poll()) is None
    assert fake.trace == [
        ("BEGIN",),
        ("lock_next_candidate", {"take_expired": True, "max_attempts": 25, "now": NOW}),
        ("COMMIT",),
        ("record", "idle", "w0", None, None, None),
        ("wait", 2.0),
    ]


@pytest.mark.parametrize(
    ("strategy", "statement"),
    [("conditional_update", "claim_conditional"), ("read_then_write", "claim_unconditional")],
)
def test_read_then_claim_by_id_moves_to_the_next_candidate_when_one_is_lost(strategy, statement):
    fake = Fake(
        ("select_candidates", [(3,), (5,)]),
        (statement, []),  # someone else took job 3
        (statement, [(5, 2)]),
    )
    lease = fake.play(worker(claim=strategy, candidates=2, claim_takes_expired=False).poll())
    assert fake.trace == [
        (
            "select_candidates",
            {"take_expired": False, "max_attempts": 25, "limit": 2, "now": NOW},
        ),
        (statement, claim_params(id=3, now=NOW, lease_until=NOW + 30)),
        ("record", "claim_lost", "w0", 3, None, None),
        (statement, claim_params(id=5, now=NOW, lease_until=NOW + 30)),
        ("record", "claim", "w0", 5, 2, NOW + 30),
    ]
    assert (lease.job, lease.attempt) == (5, 2)


def test_all_candidates_lost_reads_again():
    fake = Fake(
        ("select_candidates", [(3,)]),
        ("claim_conditional", []),
        ("select_candidates", []),
    )
    assert fake.play(worker(claim="conditional_update").poll()) is None
    assert [step[0] if step[0] != "record" else step[1] for step in fake.trace] == [
        "select_candidates",
        "claim_conditional",
        "claim_lost",
        "select_candidates",
        "idle",
        "wait",
    ]


def test_a_claim_without_a_database_is_recorded_and_waits_a_poll():
    fake = Fake(("select_candidates", DbUnavailable("select_candidates")))
    assert fake.play(worker().poll()) is None
    assert fake.trace[1:] == [("record", "db_error", "w0", None, None, "claim"), ("wait", 1.0)]


def test_polling_until_claimed_is_polls_one_after_another_until_a_lease():
    """The model's plain loop plays polls as one sequence: a poll without a database, an idle
    poll, then a claim, step for step what three calls of poll() send and record."""
    script = (
        ("select_candidates", DbUnavailable("select_candidates")),
        ("select_candidates", []),
        ("select_candidates", [(4,)]),
        ("claim_conditional", [(4, 1)]),
    )
    together = Fake(*script)
    lease = together.play(worker(claim="conditional_update").poll_until_claimed())
    polls = worker(claim="conditional_update")
    apart = [Fake(*script[:1]), Fake(*script[1:2]), Fake(*script[2:])]  # one poll's answers each
    leases = [fake.play(polls.poll()) for fake in apart]
    assert leases[:2] == [None, None]
    assert (lease.job, lease.attempt, lease.until) == (4, 1, NOW + 30.0)
    assert (leases[2].job, leases[2].attempt, leases[2].until) == (4, 1, NOW + 30.0)
    assert together.trace == [step for fake in apart for step in fake.trace]
    assert [step[1] for step in together.trace if step[0] == "record"] == [
        "db_error",
        "idle",
        "claim",
    ]


# ---- the handler and its completion --------------------------------------------------------------


def spec_of(job: int):
    event_id = f"evt-{job}"
    return event_id, payload_hash(payload_json(event_id, 1000 + job))


def first_delivery(job: int) -> Fake:
    """The database's answers to a first delivery of `job` (dedup on): marker, ledger row,
    fenced completion all take."""
    event_id, _ = spec_of(job)
    return Fake(
        ("insert_dedup_marker", [(event_id,)]),
        ("insert_ledger_entry", [(1,)]),
        ("complete_fenced", [(job,)]),
    )


def test_handler_charges_then_completes_with_marker_ledger_and_fenced_completion():
    event_id, digest = spec_of(2)
    fake = first_delivery(2)
    lease = Lease(2, 1, 130.0)
    fake.play(worker(dedup=True, idempotency_key=True).handle(lease))
    assert fake.trace == [
        ("work", 10.0),  # psp_at 0.5 of 20 s
        ("charge", event_id),  # the idempotency key is the event id
        ("record", "psp_charge", "w0", 2, 1, "new"),
        ("wait", 0.25),  # the PSP call
        ("work", 10.0),
        ("BEGIN",),
        ("insert_dedup_marker", {"event_id": event_id, "payload_hash": digest, "now": NOW}),
        (
            "insert_ledger_entry",
            {
                "job_id": 2,
                "event_id": event_id,
                "amount_cents": 1002,
                "worker": "w0",
                "attempt": 1,
                "now": NOW,
            },
        ),
        ("complete_fenced", {"id": 2, "owner": "w0", "attempt": 1, "now": NOW}),
        ("COMMIT",),
        ("record", "effect", "w0", 2, 1, event_id),
        ("record", "complete", "w0", 2, 1, 130.0),
    ]
    assert lease.done  # no more heartbeats once the completion began


def test_unfenced_completion_is_by_id_alone_and_a_replayed_charge_is_recorded_as_such():
    fake = Fake(("insert_ledger_entry", [(1,)]), ("complete_unfenced", [(2,)]), charge="replay")
    fake.play(worker(fencing=False).handle(Lease(2, 1, 130.0)))
    assert ("record", "psp_charge", "w0", 2, 1, "replay") in fake.trace
    assert ("charge", None) in fake.trace  # no idempotency key by default
    assert ("complete_unfenced", {"id": 2, "now": NOW}) in fake.trace


def test_a_duplicate_delivery_skips_the_effect_but_completes():
    event_id, digest = spec_of(3)
    fake = Fake(
        ("insert_dedup_marker", []),
        ("read_dedup_marker", [(event_id, digest)]),
        ("complete_fenced", [(3,)]),
    )
    fake.play(worker(dedup=True).handle(Lease(3, 2, 130.0)))
    assert fake.trace[-7:] == [
        ("BEGIN",),
        ("insert_dedup_marker", {"event_id": event_id, "payload_hash": digest, "now": NOW}),
        ("read_dedup_marker", {"event_id": event_id}),  # the same payload: a duplicate
        ("complete_fenced", {"id": 3, "owner": "w0", "attempt": 2, "now": NOW}),
        ("COMMIT",),
        ("record", "dedup_skip", "w0", 3, 2, event_id),
        ("record", "complete", "w0", 3, 2, 130.0),
    ]


@pytest.mark.parametrize(("rejected", "outcome"), [([(3,)], "payload_conflict"), ([], "refused")])
def test_another_payload_under_the_same_event_id_is_rejected_fenced(rejected, outcome):
    event_id, _ = spec_of(3)
    fake = Fake(
        ("insert_dedup_marker", []),
        ("read_dedup_marker", [(event_id, "another-hash")]),
        ("reject_job_fenced", rejected),
    )
    fake.play(worker(dedup=True).handle(Lease(3, 2, 130.0)))
    reason = "payload differs from the first delivery of this event id"
    assert fake.trace[-3] == (
        "reject_job_fenced",
        {"id": 3, "owner": "w0", "attempt": 2, "error": reason, "now": NOW},
    )
    if outcome == "payload_conflict":
        assert fake.trace[-2:] == [
            ("COMMIT",),
            ("record", "payload_conflict", "w0", 3, 2, reason),
        ]
    else:  # the worker no longer owns the job: nothing of the transaction stays
        assert fake.trace[-2:] == [
            ("ROLLBACK",),
            ("record", "complete_rejected", "w0", 3, 2, 130.0),
        ]


def test_a_refused_fenced_completion_rolls_the_effect_back():
    fake = Fake(("insert_ledger_entry", [(1,)]), ("complete_fenced", []))
    fake.play(worker().handle(Lease(2, 1, 130.0)))
    assert fake.trace[-2:] == [("ROLLBACK",), ("record", "complete_rejected", "w0", 2, 1, 130.0)]


@pytest.mark.parametrize("completion", ["transaction", "background"])
def test_a_result_past_the_deadline_is_dropped_where_the_worker_would_send_it(completion):
    """deadline_action = drop: in a transaction nothing of the completing transaction is sent; in
    the background the handler's own transaction commits its effect, the completion is not sent."""
    protocol, lease = worker(completion=completion, deadline=5.0), Lease(2, 1, 130.0)
    lease.past_deadline = True
    effect = [("insert_ledger_entry", [(1,)])] if completion == "background" else []
    fake = Fake(*effect)
    fake.play(protocol.complete(lease, protocol.catalog[2]))
    dropped = ("record", "late_result", "w0", 2, 1, "dropped")
    if completion == "transaction":
        assert fake.trace == [dropped]
    else:
        steps = [t[0] for t in fake.trace]
        assert steps == ["BEGIN", "insert_ledger_entry", "COMMIT", "record", "record"]
        assert fake.trace[-2][1] == "effect" and fake.trace[-1] == dropped
    late = worker(completion=completion, deadline=5.0, deadline_action="complete")
    lease = Lease(2, 1, 130.0)
    lease.past_deadline = True
    fake = Fake(("insert_ledger_entry", [(1,)]), ("complete_fenced", [(2,)]))
    fake.play(late.complete(lease, late.catalog[2]))
    assert fake.trace[-1] == ("record", "complete", "w0", 2, 1, 130.0)  # completes late


def test_a_server_error_in_the_completion_rolls_back_and_is_recorded():
    fake = Fake(
        ("insert_ledger_entry", [(1,)]),
        ("complete_fenced", StatementError("complete_fenced", "deadlock detected")),
    )
    fake.play(worker().handle(Lease(2, 1, 130.0)))
    assert fake.trace[-2:] == [("ROLLBACK",), ("record", "db_error", "w0", 2, 1, "complete")]


def test_a_lost_database_in_the_handler_is_recorded_with_the_statement():
    fake = Fake(("insert_ledger_entry", DbUnavailable("insert_ledger_entry")))
    fake.play(worker().handle(Lease(2, 1, 130.0)))
    assert fake.trace[-1] == ("record", "db_error", "w0", 2, 1, "insert_ledger_entry")


def test_crash_points_are_steps_only_when_the_scenario_scripts_them():
    fake = first_delivery(2)
    points = Faults(crash_points=(CrashPoint("after_psp"),))
    fake.play(worker(dedup=True, faults=points).handle(Lease(2, 1, 130.0)))
    assert [s for s in fake.trace if s[0] == "crash_point"] == [
        ("crash_point", "after_psp"),
        ("crash_point", "after_marker"),
    ]
    assert fake.trace.index(("crash_point", "after_psp")) == 4  # after the PSP call's wait


def test_a_lease_known_lost_is_abandoned_before_the_psp_call():
    lease = Lease(2, 1, 130.0)
    lease.lost = True
    fake = Fake()
    fake.play(worker(abandon_on_lost_lease=True).handle(lease))
    assert fake.trace == [("work", 10.0), ("record", "abandon", "w0", 2, 1, 130.0)]


def test_a_lease_lost_during_the_psp_call_is_abandoned_before_completing():
    lease = Lease(2, 1, 130.0)
    fake = Fake()
    fake.play(_lose_after_charge(worker(abandon_on_lost_lease=True).handle(lease), lease))
    assert fake.trace == [
        ("work", 10.0),
        ("charge", None),
        ("record", "psp_charge", "w0", 2, 1, "new"),
        ("wait", 0.25),
        ("work", 10.0),
        ("record", "abandon", "w0", 2, 1, 130.0),  # the charge happened; the completion does not
    ]


def test_a_zombie_that_does_not_abandon_goes_on_to_its_fenced_completion():
    lease = Lease(2, 1, 130.0)
    lease.lost = True
    fake = Fake(("insert_ledger_entry", [(1,)]), ("complete_fenced", []))
    fake.play(worker(abandon_on_lost_lease=False).handle(lease))
    assert fake.trace[-2:] == [("ROLLBACK",), ("record", "complete_rejected", "w0", 2, 1, 130.0)]


def _lose_after_charge(steps, lease):
    """The heartbeat learns the lease is gone while the PSP call is in flight."""
    value = None
    while True:
        try:
            step = steps.send(value)
        except StopIteration as done:
            return done.value
        if isinstance(step, protocol.Wait):
            lease.lost = True
        value = yield step


# ---- heartbeat, release, deadline ----------------------------------------------------------------


def test_a_heartbeat_renews_with_the_owner_and_attempt_and_keeps_its_step():
    protocol, lease = worker(), Lease(2, 1, 130.0)
    fake = Fake(("heartbeat", [(2, NOW + 30)]))
    assert fake.play(protocol.renew(lease)) is True
    first = lease.renewal
    assert Fake(("heartbeat", [(2, NOW + 30)])).play(protocol.renew(lease)) is True
    assert lease.renewal is first  # the statement and its parameters are built once per lease
    assert fake.trace[:2] == [
        (
            "heartbeat",
            {"id": 2, "owner": "w0", "attempt": 1, "now": NOW, "lease_until": NOW + 30},
        ),
        ("record", "heartbeat", "w0", 2, 1, NOW + 30),
    ]
    assert lease.until == NOW + 30


def test_a_rejected_heartbeat_marks_the_lease_lost_and_stops():
    protocol, lease = worker(), Lease(2, 1, 130.0)
    fake = Fake(("heartbeat", []))
    assert fake.play(protocol.renew(lease)) is False
    assert lease.lost and fake.trace[-1] == ("record", "heartbeat_rejected", "w0", 2, 1, None)


@pytest.mark.parametrize(("until", "lost"), [(NOW + 5, False), (NOW, True)])
def test_a_heartbeat_without_a_database_fails_safe_once_the_lease_ran_out(until, lost):
    protocol, lease = worker(), Lease(2, 1, until)
    fake = Fake(("heartbeat", DbUnavailable("heartbeat")))
    assert fake.play(protocol.renew(lease)) is True  # try again at the next beat
    assert lease.lost is lost
    assert fake.trace[-1] == ("record", "db_error", "w0", 2, 1, "heartbeat")


def test_heartbeat_faults_lose_or_delay_the_statement():
    protocol, lease = worker(faults=Faults(heartbeat_loss=1.0)), Lease(2, 1, 130.0)
    fake = Fake()
    assert fake.play(protocol.renew(lease)) is True
    assert fake.trace == [("record", "heartbeat_lost", "w0", 2, 1, None)]
    protocol = worker()
    protocol.hb_delay = lambda: 0.75
    fake = Fake(("heartbeat", [(2, NOW + 30)]))
    fake.play(protocol.renew(lease))
    assert fake.trace[0] == ("delay", 0.75)  # the network holds it back, not the process


def test_release_and_deadline_failure_are_fenced_and_record_the_new_status():
    protocol, lease = worker(retry_backoff=2.0, max_attempts=3), Lease(2, 1, 130.0)
    release, fail = Fake(("release_job_fenced", [(2, "Pending")])), Fake(("fail_job_fenced", []))
    release.play(protocol.release(lease))
    fail.play(protocol.fail_at_deadline(lease))
    assert release.trace + fail.trace == [
        ("release_job_fenced", {"id": 2, "owner": "w0", "attempt": 1, "max_attempts": 3}),
        ("record", "release", "w0", 2, 1, "Pending"),
        (
            "fail_job_fenced",
            {
                "id": 2,
                "owner": "w0",
                "attempt": 1,
                "max_attempts": 3,
                "retry_backoff": 2_000_000,
                "now": NOW,
            },
        ),
        ("record", "deadline", "w0", 2, 1, None),  # no longer the owner: nothing failed
    ]
    cancel = Fake(("fail_job_fenced", [(2, "Pending")]))
    cancel.play(worker(deadline=5.0, deadline_action="cancel").fail_at_deadline(lease))
    assert [t[:2] for t in cancel.trace] == [
        ("record", "cancel"),  # the driver stopped the handler first
        ("fail_job_fenced", cancel.trace[1][1]),
        ("record", "deadline"),
    ]


# ---- the watcher ---------------------------------------------------------------------------------


def test_the_watcher_requeues_in_one_statement_and_records_each_job():
    policy = scripted(watcher=True, watcher_batch=10, max_attempts=4, retry_backoff=0.5).policy
    fake = Fake(("requeue_expired", [(3, "Pending", "w1", 2), (4, "Dead", "w0", 4)]))
    fake.play(WatcherProtocol(policy).tick())
    assert fake.trace == [
        (
            "requeue_expired",
            {
                "max_attempts": 4,
                "limit": 10,
                "retry_backoff": 500_000,
                "stuck_after": policy.lease_ttl,  # the stuck age, for a rescue by age
                "now": NOW,
            },
        ),
        ("record", "watcher_tick", "watcher", None, None, 2),
        ("record", "requeue", "watcher", 3, 2, "Pending"),
        ("record", "requeue", "watcher", 4, 4, "Dead"),
    ]


def test_the_watcher_with_a_gap_reads_then_rescues_each_job_by_id_within_its_batch():
    policy = scripted(watcher=True, watcher_gap=2.0, watcher_batch=2, watcher_action="dead").policy
    fake = Fake(
        ("select_stuck_jobs", [(3, "w1", 90.0, 1), (4, "w0", 91.0, 1), (5, "w0", 92.0, 1)]),
        ("rescue_job", [(3, "Dead", "w1", 1)]),
        ("rescue_job", []),  # completed meanwhile (the unconditional rescue would not say so)
    )
    fake.play(WatcherProtocol(policy).tick())
    rescue = {"max_attempts": 0, "retry_backoff": 0}  # watcher_action dead: no attempt left
    rescue["stuck_after"] = policy.lease_ttl  # the stuck age, for a rescue by age
    assert fake.trace == [
        ("select_stuck_jobs", {"stuck_after": policy.lease_ttl, "now": NOW}),
        ("wait", 2.0),
        ("rescue_job", {"id": 3, **rescue, "now": NOW}),
        ("rescue_job", {"id": 4, **rescue, "now": NOW}),
        ("record", "watcher_tick", "watcher", None, None, 1),
        ("record", "requeue", "watcher", 3, 1, "Dead"),
    ]


def test_a_watcher_without_a_database_records_an_empty_tick():
    fake = Fake(("requeue_expired", DbUnavailable("requeue_expired")))
    fake.play(WatcherProtocol(scripted(watcher=True).policy).tick())
    assert fake.trace[-1] == ("record", "watcher_tick", "watcher", None, None, 0)


# ---- the live driver plays the same steps as blocking calls --------------------------------------


class _Connection:
    def __init__(self, *answers):
        self.answers, self.calls = list(answers), []

    def execute(self, name, params, *, ttl=None):
        if QUERIES[name].uses_clock:
            bind_clock(params, NOW, ttl)
        self.calls.append(name)
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    def control(self, command):
        self.calls.append(command)

    def abort(self):
        self.calls.append("abort")


class _Clock:
    def __init__(self):
        self.slept = []

    def now(self):
        return NOW

    def sleep(self, seconds):
        self.slept.append(seconds)


class _Records:
    def __init__(self):
        self.rows = []

    def add(self, *record):
        self.rows.append(record)


def test_the_live_driver_plays_a_handler_as_blocking_calls(tmp_path):
    clock, records = _Clock(), _Records()
    db = _Connection([(1,)], StatementError("complete_fenced", "could not serialize access"))
    driver = LiveDriver(clock, records, str(tmp_path / "psp-keys"))
    driver.play(worker(idempotency_key=True).handle(Lease(2, 1, 130.0)), db)
    assert db.calls == ["BEGIN", "insert_ledger_entry", "complete_fenced", "abort"]
    assert clock.slept == [10.0, 0.25, 10.0]
    assert records.rows == [
        (NOW, "psp_charge", "w0", 2, 1, "new"),
        (NOW, "db_error", "w0", 2, 1, "complete"),
    ]
    assert driver.charge("evt-2") == "replay"  # the key is a file every process sees
