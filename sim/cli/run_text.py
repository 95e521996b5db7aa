"""A finished run as the command line prints it: its metrics as a table, its invariant report with
examples of each unexpected violation, and where a kept schema is.

    print(format_run(run, run.check()))     # the metrics, then the invariants
"""

from __future__ import annotations

import pandas as pd


def format_run(run, report) -> str:
    """The metrics, a blank line, then the errors of the queue's statements (if any) and the
    invariant report (`report`, run.check())."""
    errors = getattr(run, "statement_errors", None) or []
    if not errors:
        return f"{format_summary(run)}\n\n{format_report(report)}"
    from sim.db.queue.guard import describe_errors

    lines = "\n".join(f"  {line}" for line in describe_errors(errors))
    return f"{format_summary(run)}\n\nstatement errors:\n{lines}\n\n{format_report(report)}"


def format_summary(run) -> str:
    """The main metrics as an aligned two-column table, under a line naming the run."""
    s, scenario = run.summary, run.scenario
    rows = [
        (
            "jobs",
            f"{s['jobs']:.0f} ({s['completed']:.0f} completed, {s['dead']:.0f} dead, "
            f"{s['unfinished']:.0f} unfinished)",
        ),
        ("lost jobs", f"{s['lost_jobs']:.0f}"),
        ("throughput", f"{_num(s['throughput_per_s'])} jobs/s"),
        ("job latency", _percentiles(s, "job_latency")),
        ("leases", f"{s['leases']:.0f}"),
        ("false expiries", f"{s['false_expiries']:.0f}"),
        ("double claims", f"{s['double_claims']:.0f}"),
        ("duplicate DB effects", f"{s['duplicate_db_effects']:.0f}"),
        (
            "duplicate PSP charges",
            f"{s['duplicate_external_effects']:.0f} (of {s['psp_charges']:.0f} charges)",
        ),
        (
            "crashes",
            f"{s['crashes']:.0f} ({s['recoveries']:.0f} jobs recovered, "
            f"{s['unrecovered_crashes']:.0f} not)",
        ),
        ("recovery latency", _percentiles(s, "recovery_latency")),
        ("DB load", f"{_num(s['statements_per_s'])} statements/s"),
    ]
    kinds = sorted(
        ((k[3:-6], v) for k, v in s.items() if k.startswith("db_") and k.endswith("_per_s")),
        key=lambda kv: -kv[1],
    )
    rows += [(f"  {kind}", f"{_num(rate)} /s") for kind, rate in kinds]
    width = max(len(label) for label, _ in rows)
    p = scenario.policy
    played = "played live" if run.backend == "live" else "simulated"
    queue = f" (queue {run.queue})" if run.queue else ""
    head = (
        f"{scenario.name}: seed {scenario.seed}, {run.backend} backend{queue}, "
        f"{scenario.horizon:g} s {played} in {run.wall_seconds:.2f} s; {p.workers} workers, "
        f"claim={p.claim}, TTL {p.lease_ttl:g} s"
    )
    lines = [head, *(f"  {label:<{width}}  {value}" for label, value in rows)]
    if run.queue_settings:
        lines.insert(1, f"  queue.toml settings applied: {applied_settings(run)}")
    return "\n".join(lines)


def applied_settings(run) -> str:
    """'claim = skip_locked, lease_ttl = 30 (60 by override)': the queue's own settings
    (queue.toml) the run applied, each with the value the run used where an override replaced it."""
    parts = []
    for key, value in run.queue_settings.items():
        name = key.removeprefix("policy.")
        used = getattr(run.scenario.policy, name, value)
        part = f"{name} = {_setting(value)}"
        if used != value:
            part += f" ({_setting(used)} by override)"
        parts.append(part)
    return ", ".join(parts)


def _setting(value) -> str:
    return str(value).lower() if isinstance(value, bool) else f"{value}"


def format_report(report, examples: int = 5) -> str:
    """The invariant report, with a few examples of each unexpected violation."""
    if not report.violations:
        return str(report)
    lines = str(report).splitlines()
    unexpected = report.unexpected
    for v in unexpected[:examples]:
        job = f"job {v.job}: " if v.job is not None else ""
        lines.append(f"  UNEXPECTED {v.invariant}: {job}{v.detail}")
    if len(unexpected) > examples:
        lines.append(f"  ... and {len(unexpected) - examples} more")
    return "\n".join(lines)


def format_kept_schema(run, dsn: str | None) -> str:
    """Where the schema a postgres run kept (keep_schema=True) is, and how to look at it and drop
    it; the server is named without a password."""
    from sim.db.server import describe_dsn, embedded_pgdata, resolve_dsn

    dsn = resolve_dsn(dsn)
    server = describe_dsn(dsn) if dsn else f"the embedded PostgreSQL ({embedded_pgdata()})"
    schema = run.kept_schema
    role = getattr(run, "kept_role", None)
    if role is None:
        return (
            f"kept schema {schema} at {server}; look with SET search_path TO {schema}, "
            f"drop with DROP SCHEMA {schema} CASCADE"
        )
    return (
        f"kept schema {schema} at {server}, owned by its role {role}, which may not log in; look "
        f"as that role, never as yourself (the queue's views and functions run with the "
        f"reader's rights): SET ROLE {role}; SET search_path TO {schema}; drop with DROP SCHEMA "
        f"{schema} CASCADE; DROP ROLE {role}"
    )


def _percentiles(s, prefix: str) -> str:
    if pd.isna(s[f"{prefix}_mean"]):
        return "-"
    return (
        f"mean {_num(s[f'{prefix}_mean'])} s, p50 {_num(s[f'{prefix}_p50'])}, "
        f"p95 {_num(s[f'{prefix}_p95'])}, p99 {_num(s[f'{prefix}_p99'])}"
    )


def _num(value) -> str:
    if pd.isna(value):
        return "-"
    return f"{value:.3g}" if abs(value) < 100 else f"{value:.0f}"
