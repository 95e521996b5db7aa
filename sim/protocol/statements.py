"""Which named statements a policy's protocol steps may send, each with the setting that sends it:
the one place that says so (the queue contracts, the SQL findings and the probes read it; a test
holds it equal to what runs send on the memory backend)."""

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


def statements_sent(scenario: Any) -> dict[str, dict[str, str]]:
    """Per protocol step that a run of `scenario` plays, the named statements it may send, each
    with the setting that has it sent: claim, heartbeat, complete, watcher_tick, register,
    process_heartbeat, watcher_prune, deadline, release (a step the run never plays is left out).
    The order is the protocol's."""
    p = scenario.policy
    sent: dict[str, dict[str, str]] = {}
    if p.prefetch == 1:
        sent["claim"] = dict.fromkeys(claim_path(p), f"policy.claim = {p.claim}")
    else:  # sim.protocol.claims.Claims.poll_batch
        sent["claim"] = {"claim_batch": "policy.prefetch > 1"}
    if p.heartbeat:
        sent["heartbeat"] = {"heartbeat": "policy.heartbeat = true"}
    complete = {
        "complete_fenced" if p.fencing else "complete_unfenced": (
            f"policy.fencing = {str(p.fencing).lower()}"
        )
    }
    if p.dedup:  # the marker, the stored marker of a duplicate, a payload conflict's rejection
        dedup = ("reject_job_fenced", "insert_dedup_marker", "read_dedup_marker")
        complete.update(dict.fromkeys(dedup, "policy.dedup = true"))
    complete["insert_ledger_entry"] = EVERY_RUN
    sent["complete"] = complete
    if p.watcher and p.sweeps_leases:
        if p.watcher_gap:
            tick = dict.fromkeys(("select_stuck_jobs", "rescue_job"), "policy.watcher_gap > 0")
        elif p.stall_check == "two_phase":
            tick = {"reclaim_stalled": "policy.stall_check = two_phase"}
        else:
            tick = {"requeue_expired": "policy.watcher = true"}
        sent["watcher_tick"] = tick
    if p.process_heartbeat_interval:
        why = "policy.process_heartbeat_interval > 0"
        sent["register"] = {"register_process": why}
        sent["process_heartbeat"] = {"process_heartbeat": why, "register_process": why}
        if p.watcher:
            sent["watcher_prune"] = {"prune_processes": why}
    if p.deadline:
        sent["deadline"] = {"fail_job_fenced": "policy.deadline > 0"}
    if scenario.faults.shutdown == "graceful":
        sent["release"] = {"release_job_fenced": "faults.shutdown = graceful"}
    return sent


def statement_settings(scenario: Any) -> dict[str, str]:
    """Every named statement a run of `scenario`'s protocol may send, with the (first) setting that
    has it sent, in the protocol's order."""
    found: dict[str, str] = {}
    for statements in statements_sent(scenario).values():
        for name, why in statements.items():
            found.setdefault(name, why)
    return found
