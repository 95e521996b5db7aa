"""The Lease Lab command line: `python -m sim list | show | run | live | demo | advise | review | sweep` (also `leaselab`).

Exit codes: 0 ok, 1 a run broke an invariant it did not expect, 2 bad input (one `error:` line).
"""

from __future__ import annotations

import argparse
import math
import os
import re
import shutil
import sys
import textwrap
import tomllib
import warnings
from pathlib import Path

import pandas as pd

from sim.db.errors import DatabaseError, user_error
from sim.errors import ConfigError
from sim.limits import MAX_RUNS, MAX_SECONDS, MAX_WORKERS
from sim.results import json_number
from sim.runner import refuse_memory, with_queue
from sim.scenario import LeaseWarning, dumps, preset, preset_names, resolve

SWEEP_METRICS = (
    "double_claims",
    "false_expiries",
    "duplicate_db_effects",
    "duplicate_external_effects",
    "recovery_latency_mean",
    "lost_jobs",
)
KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")
DEMO = (
    # (file stem, label, preset, overrides, what to look at)
    (
        "read-then-write-race",
        "read-then-write-race",
        "read-then-write-race",
        {},
        "SELECT, then UPDATE: two workers take the same job (red outlines) and both charge it.",
    ),
    (
        "read-then-write-race-conditional-update",
        "read-then-write-race (fixed)",
        "read-then-write-race",
        {"policy.claim": "conditional_update", "expect": []},
        "The same load with one atomic UPDATE ... WHERE: no job is claimed twice.",
    ),
    (
        "crash-recovery",
        "crash-recovery",
        "crash-recovery",
        {},
        "A crashed owner's lease stays valid in the DB until it lapses; the watcher requeues the job.",
    ),
    (
        "gc-pause-zombie",
        "gc-pause-zombie",
        "gc-pause-zombie",
        {},
        "A 45 s pause outlives a 15 s lease: the zombie's completion is refused, but the PSP charged twice.",
    ),
)
DEMO_COLUMNS = {  # summary.csv column -> printed header
    "scenario": "scenario",
    "claim": "claim",
    "jobs": "jobs",
    "completed": "completed",
    "leases": "leases",
    "double_claims": "double claims",
    "false_expiries": "false expiries",
    "crashes": "crashes",
    "recovery_latency_mean": "recovery (s)",
    "duplicate_db_effects": "dup. DB effects",
    "duplicate_external_effects": "dup. PSP charges",
    "invariants": "invariants",
    "figure": "figure",
}


class UsageError(Exception):
    """Bad command line: reported as one `error:` line, exit 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # argparse would print the usage and exit; we want one line
        if "COMMAND" in message:
            message += " (list, show, run, live, demo, advise, review or sweep; see --help)"
        raise UsageError(message)


def main(argv: list[str] | None = None) -> int:
    parser = _build_parser()
    argv = sys.argv[1:] if argv is None else list(argv)
    dsns = _dsns(argv)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("always", LeaseWarning)
            warnings.showwarning = _show_warning(set(), dsns)
            args = parser.parse_args(argv)
            return args.command(args)
    except (UsageError, ConfigError, DatabaseError) as exc:
        return _fail(str(exc), dsns)
    except BrokenPipeError:  # `python -m sim show x | head`
        _silence_stdout()
        return 0
    except OSError as exc:
        where = f"{exc.filename}: " if exc.filename else ""
        return _fail(f"{where}{exc.strerror or exc}", dsns)
    except SystemExit as exc:  # --help, --version
        return exc.code if isinstance(exc.code, int) else 0
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


def _build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="python -m sim",
        description="Lease Lab: simulate job queues that hand out work by leases.",
    )
    from sim import __version__

    parser.add_argument("--version", action="version", version=f"leaselab {__version__}")
    sub = parser.add_subparsers(
        title="commands", metavar="COMMAND", parser_class=_Parser, required=True
    )

    p = sub.add_parser("list", help="the named scenarios, one line each")
    p.set_defaults(command=cmd_list)

    p = sub.add_parser("show", help="print a scenario's full settings as TOML")
    p.add_argument("scenario", metavar="SCENARIO", help="preset name or path to a .toml file")
    _add_set(p)
    p.set_defaults(command=cmd_show)

    p = sub.add_parser("run", help="run a scenario; print its metrics and invariant report")
    p.add_argument("scenario", metavar="SCENARIO", help="preset name or path to a .toml file")
    _add_set(p)
    p.add_argument("--seed", type=int, help="random seed (default: the scenario's)")
    p.add_argument(
        "--backend", choices=("memory", "postgres"), help="default: the scenario's (usually memory)"
    )
    p.add_argument(
        "--dsn",
        help="PostgreSQL DSN for --backend postgres (default: $LEASELAB_DSN, "
        "$DATABASE_URL, else an embedded server)",
    )
    p.add_argument(
        "--keep-schema", action="store_true", help="postgres: keep the run's schema for inspection"
    )
    _add_sql(p)
    p.add_argument(
        "--out",
        type=Path,
        metavar="DIR",
        help="write events, leases, jobs, summary.json, scenario.toml and timeline.png here",
    )
    p.add_argument(
        "--format", choices=("csv", "parquet"), default="csv", help="table format for --out"
    )
    p.add_argument("--force", action="store_true", help="write into a non-empty --out directory")
    p.add_argument(
        "--no-heartbeat-records",
        action="store_true",
        help="leave heartbeats out of the event log (smaller, faster for long runs)",
    )
    p.set_defaults(command=cmd_run)

    p = sub.add_parser(
        "live",
        help="run a scenario with real worker processes on PostgreSQL; compare with the simulation",
    )
    p.add_argument("scenario", metavar="SCENARIO", help="preset name or path to a .toml file")
    _add_set(p)
    p.add_argument(
        "--duration", type=float, required=True, metavar="SECONDS", help="wall seconds to run"
    )
    p.add_argument(
        "--time-scale",
        type=float,
        default=1.0,
        metavar="F",
        help="wall seconds per scenario second (0.1 plays an hour in 6 minutes; default 1)",
    )
    p.add_argument(
        "--seed",
        type=int,
        help="random seed of the fault schedule and jobs (default: the scenario's)",
    )
    p.add_argument(
        "--dsn",
        help="PostgreSQL DSN (default: $LEASELAB_DSN, $DATABASE_URL, else an embedded server)",
    )
    _add_sql(p)
    p.add_argument(
        "--compare-seeds",
        type=int,
        default=0,
        metavar="N",
        help="also simulate N seeds of the same scenario and compare (default 0: no comparison)",
    )
    p.add_argument(
        "--out",
        type=Path,
        metavar="DIR",
        help="write the run's tables, summary.json, timeline.png "
        "(and comparison.csv / comparison.png) here",
    )
    p.add_argument(
        "--format", choices=("csv", "parquet"), default="csv", help="table format for --out"
    )
    p.add_argument("--force", action="store_true", help="write into a non-empty --out directory")
    p.set_defaults(command=cmd_live)

    p = sub.add_parser("demo", help="three teaching scenarios: figures and a summary table")
    p.add_argument(
        "--out",
        type=Path,
        default=Path("out/demo"),
        metavar="DIR",
        help="where to write the figures and summary.csv (default: out/demo)",
    )
    p.add_argument("--force", action="store_true", help="write into a non-empty --out directory")
    p.set_defaults(command=cmd_demo)

    p = sub.add_parser(
        "advise", help="recommend lease TTL, heartbeat and watcher intervals for observed durations"
    )
    p.add_argument(
        "durations",
        metavar="DURATIONS",
        help="CSV of observed processing seconds, or 'sample' for the bundled example",
    )
    p.add_argument(
        "--column", help="the CSV column of durations (needed when several columns hold numbers)"
    )
    p.add_argument(
        "--unit", choices=("s", "ms", "us"), default="s", help="unit of the durations (default: s)"
    )
    p.add_argument(
        "--target",
        type=float,
        default=1e-3,
        metavar="P",
        help="false-expiry probability per job to stay under (default: 0.001)",
    )
    p.add_argument(
        "--pause-rate",
        type=float,
        default=2.0,
        metavar="R",
        help="stop-the-world pauses per worker-hour (default: 2)",
    )
    p.add_argument(
        "--pause-p99",
        type=float,
        default=5.0,
        metavar="S",
        help="99th percentile of pause durations in seconds; lognormal with median S/10 (default: 5)",
    )
    p.add_argument(
        "--crash-rate",
        type=float,
        default=1.0,
        metavar="R",
        help="crashes per worker-hour (default: 1)",
    )
    p.add_argument(
        "--workers", type=int, default=4, metavar="N", help="consumer processes (default: 4)"
    )
    p.add_argument(
        "--poll-interval",
        type=float,
        default=1.0,
        metavar="S",
        help="idle poll interval (default: 1 s)",
    )
    p.add_argument(
        "--arrival-rate", type=float, metavar="R", help="jobs per second (default: full load)"
    )
    p.add_argument(
        "--min-ttl",
        type=float,
        metavar="SECONDS",
        help="never recommend a TTL below this, e.g. for GC pauses or deploys (default: no floor)",
    )
    p.add_argument(
        "--heartbeat-delay-p99",
        type=float,
        default=0.2,
        metavar="S",
        help="99th percentile of a heartbeat statement's delay (latency tail, lock waits); lognormal "
        "with median S/20 (default: 0.2)",
    )
    p.add_argument(
        "--db-stall-rate",
        type=float,
        default=0.0,
        metavar="R",
        help="DB failovers or stalls per day, all workers at once (default: 0)",
    )
    p.add_argument(
        "--db-stall-seconds",
        type=float,
        default=30.0,
        metavar="S",
        help="how long each DB failover or stall lasts (default: 30)",
    )
    p.add_argument(
        "--max-db-load",
        type=float,
        metavar="R",
        help="heartbeat + watcher statements per second the DB can spare (default: no limit)",
    )
    p.add_argument("--no-verify", action="store_true", help="skip the simulated evidence sweep")
    p.add_argument("--seed", type=int, default=0, help="seed of the evidence sweep (default: 0)")
    p.add_argument(
        "--out",
        type=Path,
        metavar="DIR",
        help="write advice.txt, candidates.csv, evidence.csv and scenario.toml here",
    )
    p.add_argument(
        "--report",
        type=Path,
        metavar="FILE.html",
        help="write one self-contained HTML report (advice, assumptions, risk, trade-off chart, evidence)",
    )
    p.add_argument("--force", action="store_true", help="write into a non-empty --out directory")
    p.set_defaults(command=cmd_advise)

    p = sub.add_parser(
        "review", help="design-review checklist of a scenario, with evidence measured by simulation"
    )
    p.add_argument("scenario", metavar="SCENARIO", help="preset name or path to a .toml file")
    _add_set(p)
    p.add_argument(
        "--seeds",
        type=int,
        default=3,
        metavar="N",
        help="runs per scenario and variant: seeds 1..N (default: 3)",
    )
    p.add_argument(
        "--no-variants", action="store_true", help="judge on the scenario's own runs only"
    )
    _add_sql(p, dsn=True)
    p.add_argument(
        "--out", type=Path, metavar="DIR", help="write review.csv, review.txt and review.png here"
    )
    p.add_argument(
        "--report",
        type=Path,
        metavar="FILE.html",
        help="write one self-contained HTML report (settings, verdicts with evidence, lease timeline)",
    )
    p.add_argument(
        "--force",
        action="store_true",
        help="write into a non-empty --out directory or over --report",
    )
    p.set_defaults(command=cmd_review)

    p = sub.add_parser(
        "sweep", help="run a grid of settings x replications; print means with 95% intervals"
    )
    p.add_argument("scenario", metavar="SCENARIO", help="preset name or path to a .toml file")
    _add_set(p)
    p.add_argument(
        "--grid",
        action="append",
        default=[],
        metavar="KEY=V1,V2,...",
        help="a setting and its values, e.g. --grid policy.watcher_interval=5,15,30; repeatable",
    )
    p.add_argument(
        "--replications", type=int, default=5, metavar="N", help="runs per grid point (default: 5)"
    )
    p.add_argument("--seed", type=int, default=0, help="sweep seed (default: 0)")
    p.add_argument(
        "--serial", action="store_true", help="run in this process instead of a process pool"
    )
    _add_sql(p, dsn=True)
    p.add_argument("--out", type=Path, metavar="DIR", help="write runs.csv and aggregate.csv here")
    p.add_argument("--force", action="store_true", help="write into a non-empty --out directory")
    p.set_defaults(command=cmd_sweep)
    return parser


def _add_sql(p: argparse.ArgumentParser, *, dsn: bool = False) -> None:
    p.add_argument(
        "--sql",
        type=Path,
        metavar="DIR",
        help="your own queue: a directory with queries.sql (overriding Lease Lab's statements by name) "
        "and optionally schema.sql; runs on the postgres backend",
    )
    if dsn:
        p.add_argument(
            "--dsn",
            help="PostgreSQL DSN for --sql (default: $LEASELAB_DSN, $DATABASE_URL, "
            "else an embedded server)",
        )


def _add_set(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        dest="assignments",
        help="override a setting, e.g. --set policy.lease_ttl=20 --set policy.claim=skip_locked "
        "(values are TOML; bare words are strings); repeatable",
    )


# ---- commands ------------------------------------------------------------------------------------


def cmd_list(args) -> int:
    names = preset_names()
    width = max(map(len, names))
    room = max(40, shutil.get_terminal_size((100, 24)).columns - width - 3)
    for name in names:
        description = preset(name).description
        first = description.split(". ")[0].rstrip(".") + "." if description else ""
        print(f"{name:<{width}}  {textwrap.shorten(first, room, placeholder=' ...')}")
    return 0


def cmd_show(args) -> int:
    print(dumps(_scenario(args.scenario, args.assignments)), end="")
    return 0


def cmd_run(args) -> int:
    scenario, queue = _on_queue(args.scenario, args.assignments, args.sql)
    changes = {}
    if args.seed is not None:
        changes["seed"] = args.seed
    if args.no_heartbeat_records:
        changes["record_heartbeats"] = False
    if changes:
        scenario = scenario.replace(**changes)
    backend = args.backend or ("postgres" if args.sql is not None else scenario.backend)
    if args.sql is not None and backend == "memory":
        refuse_memory(args.sql)
    if backend != "postgres" and (args.dsn or args.keep_schema):
        warnings.warn(
            "--dsn and --keep-schema only apply to the postgres backend; ignored",
            LeaseWarning,
            stacklevel=1,
        )
    if args.out is not None:
        _check_out(args.out, args.force)
    run = _simulate(scenario, backend, args.dsn, args.keep_schema, queue)
    report = run.check()
    print(format_summary(run))
    print()
    print(format_report(report))
    if run.kept_schema:
        print(
            f"\nkept schema {run.kept_schema} at {_server(args.dsn)}; "
            f"look with SET search_path TO {run.kept_schema}, drop with DROP SCHEMA {run.kept_schema} CASCADE"
        )
    if args.out is not None:
        written = run.save(args.out, format=args.format, report=report)
        print(f"\nwrote {args.out}/: {', '.join(p.name for p in written)}")
    return 0 if report.ok else 1


def _server(dsn: str | None) -> str:
    """Where a postgres run went, without a password."""
    from sim.db.server import describe_dsn, embedded_pgdata, resolve_dsn

    dsn = resolve_dsn(dsn)
    return describe_dsn(dsn) if dsn else f"the embedded PostgreSQL ({embedded_pgdata()})"


def cmd_demo(args) -> int:
    from sim.plots.timeline import save_timeline

    out: Path = args.out
    _check_out(out, args.force)
    out.mkdir(parents=True, exist_ok=True)
    rows, captions, reports, status = [], [], [], 0
    for stem, label, name, overrides, caption in DEMO:
        scenario = _scenario(name, [])
        if overrides:
            scenario = scenario.with_overrides(overrides)
        run = _simulate(scenario, "memory", None, False)
        report = run.check()
        reports.append(report)
        status = max(status, 0 if report.ok else 1)
        figure = out / f"{stem}.png"
        save_timeline(run, figure)
        s = run.summary
        rows.append(
            {
                "scenario": label,
                "claim": scenario.policy.claim,
                **{k: json_number(k, s[k]) for k in DEMO_COLUMNS if k in s.index},
                "invariants": _verdict(report),
                "figure": figure.name,
            }
        )
        captions.append(f"{figure.name}: {caption}")
    table = pd.DataFrame(rows, columns=list(DEMO_COLUMNS))
    table.to_csv(out / "summary.csv", index=False)
    shown = table.drop(columns=["jobs", "figure"]).rename(columns=DEMO_COLUMNS)
    shown["invariants"] = [_verdict(r, short=True) for r in reports]
    print(shown.to_string(index=False, float_format=lambda v: f"{v:.1f}", na_rep="-"))
    print()
    print("\n".join(captions))
    print(f"\nwrote {out}/: {', '.join([f'{stem}.png' for stem, *_ in DEMO] + ['summary.csv'])}")
    return status


def cmd_advise(args) -> int:
    from sim.advisor import DEFAULT_TTLS, advise, write_advice
    from sim.dists import Dist

    checks = [
        ("--target", args.target, 0 < args.target < 1, "must be a probability between 0 and 1"),
        ("--pause-rate", args.pause_rate, args.pause_rate >= 0, "must be >= 0 per worker-hour"),
        ("--pause-p99", args.pause_p99, args.pause_p99 > 0, "must be > 0 seconds"),
        ("--crash-rate", args.crash_rate, args.crash_rate >= 0, "must be >= 0 per worker-hour"),
        (
            "--pause-p99",
            args.pause_p99,
            args.pause_p99 <= MAX_SECONDS,
            f"must be at most {MAX_SECONDS:g} s",
        ),
        ("--workers", args.workers, args.workers >= 1, "must be at least 1"),
        (
            "--workers",
            args.workers,
            args.workers <= MAX_WORKERS,
            f"must be at most {MAX_WORKERS:,}",
        ),
        (
            "--poll-interval",
            args.poll_interval,
            args.poll_interval <= MAX_SECONDS,
            f"must be at most {MAX_SECONDS:g} s",
        ),
        ("--poll-interval", args.poll_interval, args.poll_interval > 0, "must be > 0 seconds"),
        (
            "--arrival-rate",
            args.arrival_rate,
            args.arrival_rate is None or args.arrival_rate > 0,
            "must be > 0 jobs per second",
        ),
        (
            "--min-ttl",
            args.min_ttl,
            args.min_ttl is None or args.min_ttl > 0,
            "must be > 0 seconds",
        ),
        (
            "--heartbeat-delay-p99",
            args.heartbeat_delay_p99,
            args.heartbeat_delay_p99 > 0,
            "must be > 0 seconds",
        ),
        ("--db-stall-rate", args.db_stall_rate, args.db_stall_rate >= 0, "must be >= 0 per day"),
        (
            "--db-stall-seconds",
            args.db_stall_seconds,
            args.db_stall_seconds > 0,
            "must be > 0 seconds",
        ),
        (
            "--max-db-load",
            args.max_db_load,
            args.max_db_load is None or args.max_db_load > 0,
            "must be > 0 statements per second",
        ),
        (
            "--min-ttl",
            args.min_ttl,
            args.min_ttl is None or not args.min_ttl > max(DEFAULT_TTLS),
            f"must be at most {max(DEFAULT_TTLS)} s, the longest TTL the advisor considers",
        ),
    ]
    for flag, value, ok, message in checks:
        if not ok or (isinstance(value, float) and not math.isfinite(value)):
            raise UsageError(f"{flag} {value:g}: {message}")
    if args.out is not None:
        _check_out(args.out, args.force)
    if args.report is not None:
        _check_report(args.report, args.force)
    advice = advise(
        args.durations,
        column=args.column,
        unit=args.unit,
        target_false_expiry=args.target,
        pause_rate=args.pause_rate,
        pause_duration=Dist.lognormal(args.pause_p99 / 10, args.pause_p99),
        crash_rate=args.crash_rate,
        heartbeat_delay=Dist.lognormal(args.heartbeat_delay_p99 / 20, args.heartbeat_delay_p99),
        db_stall_rate=args.db_stall_rate,
        db_stall_duration=args.db_stall_seconds,
        workers=args.workers,
        poll_interval=args.poll_interval,
        arrival_rate=args.arrival_rate,
        max_db_load=args.max_db_load,
        min_ttl=args.min_ttl,
        verify=not args.no_verify,
        seed=args.seed,
    )
    print(advice)
    if args.out is not None:
        written = write_advice(advice, args.out)
        print(f"\nwrote {args.out}/: {', '.join(p.name for p in written)}")
    if args.report is not None:
        print(f"wrote {advice.save_report(args.report)}")
    return 0


def cmd_review(args) -> int:
    from sim.review import review

    if not 1 <= args.seeds <= MAX_RUNS:
        raise UsageError(f"--seeds {args.seeds}: must be from 1 to {MAX_RUNS:,}")
    scenario, queue = _on_queue(args.scenario, args.assignments, args.sql)
    if args.out is not None:
        _check_out(args.out, args.force)
    if args.report is not None:
        _check_report(args.report, args.force)
    result = review(
        scenario,
        seeds=range(1, args.seeds + 1),
        variants=not args.no_variants,
        sql=queue,
        dsn=args.dsn,
    )
    print(result)
    if args.report is not None:
        print(f"wrote {result.save_report(args.report)}")
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        result.table.to_csv(args.out / "review.csv")
        (args.out / "review.txt").write_text(str(result) + "\n", encoding="utf-8")
        result.figure().savefig(args.out / "review.png", dpi=110)
        print(f"\nwrote {args.out}/: review.csv, review.txt, review.png")
    return 0


def cmd_sweep(args) -> int:
    import sim

    if args.replications < 1:
        raise UsageError(f"--replications {args.replications}: must be at least 1")
    scenario, queue = _on_queue(args.scenario, args.assignments, args.sql)
    grid = {}
    for item in args.grid:
        key, sep, values = item.partition("=")
        if not sep or not key.strip() or not values.strip():
            raise UsageError(
                f"--grid expects KEY=V1,V2,... (e.g. policy.watcher_interval=5,30), got {item!r}"
            )
        grid[key.strip()] = [_toml_value(key, v.strip()) for v in values.split(",")]
    if args.out is not None:
        _check_out(args.out, args.force)
    result = sim.sweep(
        scenario,
        grid,
        replications=args.replications,
        seed=args.seed,
        executor="serial" if args.serial else None,
        sql=queue,
        dsn=args.dsn,
    )
    table = result.aggregate()
    shown = [
        c
        for c in table.columns
        if c in grid or c == "n" or c.endswith("_mean") and c[:-5] in SWEEP_METRICS
    ]
    print(
        f"{scenario.name}: {len(result.runs)} runs in {result.wall_seconds:.1f} s"
        + (f" on the queue in {args.sql}" if args.sql is not None else "")
    )
    print(table[shown].to_string(index=False, float_format=lambda v: f"{v:.3g}"))
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        result.runs.to_csv(args.out / "runs.csv", index=False)
        table.to_csv(args.out / "aggregate.csv", index=False)
        print(f"\nwrote {args.out}/: runs.csv, aggregate.csv")
    return 0


# ---- building blocks (importable) ----------------------------------------------------------------


def parse_assignments(items: list[str]) -> dict[str, object]:
    """`key=value` strings -> {dotted key: value}; values are TOML, a bare word is a string."""
    out: dict[str, object] = {}
    for item in items:
        key, sep, text = item.partition("=")
        key, text = key.strip(), text.strip()
        if not sep or not key:
            raise UsageError(f"--set expects KEY=VALUE (e.g. policy.lease_ttl=20), got {item!r}")
        if not KEY.fullmatch(key):
            raise UsageError(f"--set {item!r}: {key!r} is not a dotted key like policy.lease_ttl")
        if not text:
            raise UsageError(f"--set {item!r}: missing value after '='")
        out[key] = _toml_value(key, text)
    return out


def _toml_value(key: str, text: str):
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError as exc:
        if text[0] in "[{\"'" or any(c.isspace() for c in text):
            raise UsageError(f"--set {key}={text}: not a TOML value ({exc})") from None
        return text  # a bare word: skip_locked, postgres, data/durations.csv


def cmd_live(args) -> int:
    from sim.comparison import compare
    from sim.live import LiveError, live

    scenario, queue = _on_queue(args.scenario, args.assignments, args.sql)
    if args.compare_seeds < 0:
        raise ConfigError(f"--compare-seeds: must be a whole number >= 0, got {args.compare_seeds}")
    if args.out is not None:
        _check_out(args.out, args.force)
    try:
        run = live(
            scenario,
            duration=args.duration,
            time_scale=args.time_scale,
            dsn=args.dsn,
            seed=args.seed,
            sql=queue,
        )
    except LiveError as exc:
        return _fail(str(exc))
    report = run.check()
    print(format_summary(run))
    print()
    print(format_report(report))
    comparison = None
    if args.compare_seeds:
        comparison = compare(run, args.compare_seeds)
        print()
        print(comparison)  # ends with the run's overload warnings
    else:
        for warning in run.overload():
            print(f"warning: {warning}")
    if args.out is not None:
        written = run.save(args.out, format=args.format, report=report)
        if comparison is not None:
            comparison.table.to_csv(args.out / "comparison.csv")
            comparison.figure().savefig(args.out / "comparison.png", dpi=120)
            written += [args.out / "comparison.csv", args.out / "comparison.png"]
        print(f"\nwrote {args.out}/: {', '.join(p.name for p in written)}")
    return 0 if report.ok else 1


def _scenario(name: str, assignments: list[str]):
    return _on_queue(name, assignments, None)[0]


def _on_queue(name: str, assignments: list[str], sql):
    """(the scenario with --set applied over the settings of the queue directory `sql`, if any;
    the queue to pass on, its settings settled (sim.runner.with_queue), or None)."""
    overrides = parse_assignments(assignments)
    if sql is not None and overrides.get("backend") == "memory":
        refuse_memory(sql)
    scenario, queue = resolve(name), None
    if sql is not None:
        scenario, queue = with_queue(scenario, sql)
    return (scenario.with_overrides(overrides) if overrides else scenario), queue


def _simulate(scenario, backend: str, dsn, keep_schema: bool, sql=None):
    import sim

    try:
        return sim.run(scenario, backend=backend, dsn=dsn, keep_schema=keep_schema, sql=sql)
    except ImportError as exc:
        if backend == "postgres":
            raise ConfigError(f"backend postgres is not available: {exc}") from None
        raise
    except Exception as exc:
        problem = user_error(exc) if backend == "postgres" else None
        if problem is not None:
            raise problem from None
        raise


def _check_out(out: Path, force: bool) -> None:
    if out.exists() and not out.is_dir():
        raise ConfigError(f"--out {out}: exists and is not a directory")
    if out.is_dir() and any(out.iterdir()) and not force:
        raise ConfigError(
            f"--out {out}: directory is not empty; choose another or pass --force to overwrite"
        )


def _check_report(path: Path, force: bool) -> None:
    if path.suffix.lower() not in (".html", ".htm"):
        raise ConfigError(f"--report {path}: expected a file name ending in .html")
    if path.is_dir():
        raise ConfigError(f"--report {path}: is a directory; give a file name ending in .html")
    if path.exists() and not force:
        raise ConfigError(
            f"--report {path}: exists; choose another name or pass --force to overwrite"
        )
    if not path.parent.is_dir():
        raise ConfigError(f"--report {path}: directory {path.parent} does not exist")


# ---- text output ---------------------------------------------------------------------------------


def format_summary(run) -> str:
    """The main metrics as an aligned two-column table."""
    s, scenario = run.summary, run.scenario
    rows = [
        (
            "jobs",
            f"{s['jobs']:.0f} ({s['completed']:.0f} completed, {s['dead']:.0f} dead, {s['unfinished']:.0f} unfinished)",
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
            f"{s['crashes']:.0f} ({s['recoveries']:.0f} jobs recovered, {s['unrecovered_crashes']:.0f} not)",
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
    queue = f" (queue {run.queue})" if getattr(run, "queue", None) else ""
    head = (
        f"{scenario.name}: seed {scenario.seed}, {run.backend} backend{queue}, {scenario.horizon:g} s {played} "
        f"in {run.wall_seconds:.2f} s; {p.workers} workers, claim={p.claim}, TTL {p.lease_ttl:g} s"
    )
    return "\n".join([head, *(f"  {label:<{width}}  {value}" for label, value in rows)])


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


def _verdict(report, short: bool = False) -> str:
    unexpected = sorted({v.invariant for v in report.unexpected})
    expected = sorted(set(report.counts()) - set(unexpected))
    if short:
        if unexpected:
            return f"{len(report.unexpected)} UNEXPECTED"
        return f"ok ({len(report.violations)} expected)" if expected else "ok"
    parts = []
    if unexpected:
        parts.append("UNEXPECTED: " + ", ".join(unexpected))
    if expected:
        parts.append("expected: " + ", ".join(expected))
    return "; ".join(parts) or "all hold"


def _show_warning(seen: set, dsns: list[str]):
    def show(message, category, filename, lineno, file=None, line=None):
        text = _scrub(" ".join(str(message).split()), dsns)
        if issubclass(category, LeaseWarning):
            if text not in seen:
                seen.add(text)
                print(f"warning: {text}", file=sys.stderr)
        else:
            print(
                warnings.formatwarning(message, category, filename, lineno, line),
                end="",
                file=sys.stderr,
            )

    return show


def _silence_stdout() -> None:
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


def _fail(message: str, dsns: list[str] = ()) -> int:
    print(f"error: {_scrub(' '.join(message.split()), dsns)}", file=sys.stderr)
    return 2


def _dsns(argv: list[str]) -> list[str]:
    """The DSNs this command may use (--dsn, $LEASELAB_DSN, $DATABASE_URL): their passwords are
    scrubbed from every message, whatever raised it."""
    found = [os.environ.get("LEASELAB_DSN"), os.environ.get("DATABASE_URL")]
    for i, item in enumerate(argv):
        option, eq, value = item.partition("=")
        if len(option) > 2 and "--dsn".startswith(option):  # argparse also takes --ds, --d
            found.append(value if eq else argv[i + 1] if i + 1 < len(argv) else "")
    return [d for d in found if d]


def _scrub(text: str, dsns: list[str]) -> str:
    if not dsns:
        return text
    from sim.db.server import scrub

    return scrub(text, *dsns)


if __name__ == "__main__":
    sys.exit(main())
