"""Which named statements a policy's protocol steps may send, each with the setting that sends it:
the one place that says so (the queue contracts, the SQL findings and the probes read it; a test
holds it equal to what runs send on the memory backend). The probes take the same paths: a
claim (claim_path), a watcher tick (watcher_path), every write by a worker (worker_writes)."""

from __future__ import annotations

from typing import Any

EVERY_RUN = "every run"


def claim_path(policy: Any) -> tuple[str, ...]:
    """The statements one claim of a job sends, in order (the read, then the write by id; or the
    one statement that does both), whatever policy.prefetch."""
    return {
        "read_then_write": ("select_candidates", "claim_unconditional"),
        "conditional_update": ("select_candidates", "claim_conditional"),
        "skip_locked": ("claim_skip_locked",),
        "select_for_update": ("lock_next_candidate", "claim_unconditional"),
    }[policy.claim]


def watcher_path(policy: Any) -> tuple[str, ...]:
    """The statements one watcher tick sends to move jobs whose lease expired, in order (the read
    of the stuck jobs, then the write by id of each; or the one statement that finds and moves
    them), whatever policy.watcher and policy.sweeps_leases."""
    return _watcher_tick(policy)[0]


def _watcher_tick(policy: Any) -> tuple[tuple[str, ...], str]:
    """(the watcher's path, the setting that has it taken): sim.protocol.watcher.WatcherProtocol."""
    if policy.watcher_gap:
        return ("select_stuck_jobs", "rescue_job"), "policy.watcher_gap > 0"
    if policy.stall_check == "two_phase":
        return ("reclaim_stalled",), "policy.stall_check = two_phase"
    return ("requeue_expired",), "policy.watcher = true"


def _worker_writes(scenario: Any) -> dict[str, tuple[str, str, bool]]:
    """Every statement by which a worker writes the job it holds, under any setting, the
    completion first: name -> (the step that sends it, the setting that has it sent, whether
    `scenario`'s settings do)."""
    p = scenario.policy
    return {
        "complete_fenced": ("complete", "policy.fencing = true", p.fencing),
        "complete_unfenced": ("complete", "policy.fencing = false", not p.fencing),
        "heartbeat": ("heartbeat", "policy.heartbeat = true", p.heartbeat),
        "reject_job_fenced": ("complete", "policy.dedup = true", p.dedup),
        "fail_job_fenced": ("deadline", "policy.deadline > 0", bool(p.deadline)),
        "release_job_fenced": (
            "release",
            "faults.shutdown = graceful",
            scenario.faults.shutdown == "graceful",
        ),
    }


def worker_writes(scenario: Any, *, any_setting: bool = False) -> dict[str, str]:
    """The statements by which a worker writes the job it holds (the fencing of each is the
    review's), the completion first, each with the setting that has it sent: those `scenario`'s
    settings send, or with `any_setting` those some setting of its steps would."""
    return {
        name: why
        for name, (_step, why, sent) in _worker_writes(scenario).items()
        if sent or any_setting
    }


def statements_sent(scenario: Any) -> dict[str, dict[str, str]]:
    """Per protocol step that a run of `scenario` plays, the named statements it may send, each
    with the setting that has it sent: claim, heartbeat, complete, watcher_tick, register,
    process_heartbeat, watcher_prune, deadline, release (a step the run never plays is left out).
    The order is the protocol's."""
    p = scenario.policy
    sent: dict[str, dict[str, str]] = {}
    writes = _worker_writes(scenario)

    def writes_of(step: str) -> dict[str, str]:
        return {n: why for n, (s, why, on) in writes.items() if s == step and on}

    if p.prefetch == 1:
        sent["claim"] = dict.fromkeys(claim_path(p), f"policy.claim = {p.claim}")
    else:  # sim.protocol.claims.Claims.poll_batch
        sent["claim"] = {"claim_batch": "policy.prefetch > 1"}
    if p.heartbeat:
        sent["heartbeat"] = writes_of("heartbeat")
    complete = writes_of("complete")  # the completion, a payload conflict's rejection (dedup)
    if p.dedup:  # the marker, the stored marker of a duplicate
        dedup = ("insert_dedup_marker", "read_dedup_marker")
        complete.update(dict.fromkeys(dedup, "policy.dedup = true"))
    complete["insert_ledger_entry"] = EVERY_RUN
    sent["complete"] = complete
    if p.watcher and p.sweeps_leases:
        path, why = _watcher_tick(p)
        sent["watcher_tick"] = dict.fromkeys(path, why)
    if p.process_heartbeat_interval:
        why = "policy.process_heartbeat_interval > 0"
        sent["register"] = {"register_process": why}
        sent["process_heartbeat"] = {"process_heartbeat": why, "register_process": why}
        if p.watcher:
            sent["watcher_prune"] = {"prune_processes": why}
    if p.deadline:
        sent["deadline"] = writes_of("deadline")
    if scenario.faults.shutdown == "graceful":
        sent["release"] = writes_of("release")
    return sent


def statement_settings(scenario: Any) -> dict[str, str]:
    """Every named statement a run of `scenario`'s protocol may send, with the (first) setting that
    has it sent, in the protocol's order."""
    found: dict[str, str] = {}
    for statements in statements_sent(scenario).values():
        for name, why in statements.items():
            found.setdefault(name, why)
    return found
