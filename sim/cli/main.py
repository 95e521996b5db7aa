"""The Lease Lab command line, `python -m sim COMMAND` (also `leaselab`): list, show, run, live,
demo, advise, review, sweep, hunt. It parses and prints; the library checks, runs and writes files.

Exit codes: 0 ok, 1 a run broke an invariant it did not expect, 2 bad input (one `error:` line),
3 Lease Lab itself failed (its traceback). No message shows a password from a DSN it could know.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import textwrap
import warnings
from functools import partial
from pathlib import Path
from typing import Any

from sim import __version__
from sim.cli.messages import dsns_in, failed, interrupted, show_warning, silence_stdout
from sim.cli.overrides import parse_assignments, parse_grid
from sim.errors import ConfigError
from sim.scenario.limits import MAX_COMPARE_SEEDS, MAX_RUNS
from sim.scenario.settings import LeaseWarning, dumps, prepared, preset, preset_names
from sim.support.interrupts import terminate_like_interrupt
from sim.support.output_paths import check_directory, check_report

ADVISE_OPTIONS = (  # flag, type, default (shown unless None), metavar, help
    ("--target", float, None, "P", "false-expiry probability per job (default: 0.001)"),
    ("--target-per-day", float, None, "N", "false expiries a day to stay under, at --arrival-rate"),
    ("--pause-rate", float, None, "R", "stop-the-world pauses per worker-hour (default: 2)"),
    ("--pause-p99", float, None, "S", "p99 of pauses (s), lognormal, median S/10 (default: 5)"),
    ("--pauses", str, None, "FILE", "a CSV of measured pause durations instead of --pause-p99"),
    ("--pause-column", str, None, "NAME", "the --pauses column (when several hold numbers)"),
    ("--pause-hours", float, None, "H", "worker-hours --pauses covers: measures --pause-rate"),
    ("--crash-rate", float, 1.0, "R", "crashes per worker-hour"),
    ("--workers", int, 4, "N", "consumer processes"),
    ("--poll-interval", float, 1.0, "S", "idle poll interval (s)"),
    ("--arrival-rate", float, None, "R", "jobs per second (default: half what the workers carry)"),
    ("--min-ttl", float, None, "S", "never a shorter TTL (GC pauses, deploys; default: no floor)"),
    ("--heartbeat-delay-p99", float, 0.2, "S", "p99 heartbeat delay (s), lognormal, median S/20"),
    ("--db-stall-rate", float, 0.0, "R", "DB failovers or stalls per day, all workers at once"),
    ("--db-stall-seconds", float, 30.0, "S", "how long each DB failover or stall lasts"),
    ("--max-db-load", float, None, "R", "cap on heartbeat + watcher statements/s (default: none)"),
    ("--replications", int, 4, "N", "runs per TTL in the evidence sweep"),
    ("--seed", int, 0, "N", "seed of the evidence sweep"),
)
HUNT_OPTIONS = (  # flag, type, default, help
    ("--time", float, 60.0, "seconds of search (default 60; shrinking and replays come after)"),
    ("--workers", int, 2, "at most this many workers in a schedule (default 2)"),
    ("--jobs", int, 2, "at most this many jobs (default 2)"),
    ("--max-faults", int, 3, "at most this many faults (default 3)"),
    ("--seed", int, 0, "seed of the search (default 0)"),
    ("--parallel", int, 1, "processes searching on this machine (default 1)"),
    ("--schedules", int, None, "stop after this many schedules (default: when time is up)"),
)
PREFER = "how the choice weighs recovery against risk; the advice states the rule (balanced)"
COMMANDS = {  # name: what it does (python -m sim --help)
    "list": "the named scenarios, one line each",
    "show": "print a scenario's full settings as TOML",
    "run": "run a scenario; print its metrics and invariant report",
    "live": "run a scenario with real worker processes on PostgreSQL; compare with the simulation",
    "demo": "four runs of three teaching scenarios: figures and a summary table",
    "advise": "recommend lease TTL, heartbeat and watcher intervals for observed durations",
    "review": "design-review checklist of a scenario, with evidence measured by simulation",
    # argparse formats help text with %: %% prints one
    "sweep": "run a grid of settings x replications; print means with 95%% intervals",
    "hunt": "search fault schedules for the shortest timeline that breaks an invariant",
}
SET = "override a setting, e.g. policy.lease_ttl=20 (values are TOML; bare words are strings)"
SQL = "your own queue: a directory with queries.sql (and schema.sql); runs on PostgreSQL"
OWN_RIGHTS = (
    "with --sql: run your SQL with the DSN user's own rights, not in a role of the run's own "
    "that may touch only the run's schema (for a user who cannot create roles)"
)
GRID = "a setting and its values, e.g. policy.watcher_interval=5,15,30; repeatable"
TIME_SCALE = "wall seconds per scenario second (0.1 plays an hour in 6 minutes; default 1)"
HUNT = "also hunt this many seconds for the shortest bad timelines (in the report)"
SEEDS = "runs of the scenario and of each variant: seeds 1..N (default: 3)"
COMPARE_SEEDS = "also simulate N seeds of the scenario and compare (default 0: no comparison)"
AS = "also answer in that queue's own settings and units (bullmq, temporal, celery-redis, ...)"


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # argparse would print the usage and exit; we want one line
        if "COMMAND" in message:
            message += " (list, show, run, live, demo, advise, review, sweep or hunt; see --help)"
        raise ConfigError(message)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    dsns = dsns_in(argv)
    args = None
    try:
        with warnings.catch_warnings(), terminate_like_interrupt():
            warnings.simplefilter("always", LeaseWarning)
            warnings.showwarning = show_warning(set(), dsns)
            args = _build_parser().parse_args(argv)
            _own_rights(args)
            return args.command(args)
    except BrokenPipeError:  # `python -m sim show x | head`
        silence_stdout()
        return 0
    except SystemExit as exc:  # --help, --version
        return exc.code if isinstance(exc.code, int) else 0
    except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM after the same cleanup
        return interrupted(exc)
    except Exception as exc:  # every error leaves through here, its passwords scrubbed
        return failed(exc, args, dsns)


def _own_rights(args) -> None:
    """--own-rights goes with the queue directory it applies to."""
    if not getattr(args, "own_rights", False):
        return
    if args.sql is None:
        raise ConfigError("--own-rights: applies to a queue's own SQL; give --sql DIR too")
    from sim.db.queue.directory import load_queue

    args.sql = load_queue(args.sql, own_rights=True)


def _build_parser() -> argparse.ArgumentParser:
    about = "Lease Lab: simulate job queues that hand out work by leases."
    parser = _Parser(prog="python -m sim", description=about)
    parser.add_argument("--version", action="version", version=f"leaselab {__version__}")
    sub = parser.add_subparsers(title="commands", metavar="COMMAND", parser_class=_Parser)
    sub.required = True
    sub.add_parser("list", help=COMMANDS["list"]).set_defaults(command=cmd_list)
    _scenario(sub.add_parser("show", help=COMMANDS["show"]), cmd_show)

    p = _scenario(sub.add_parser("run", help=COMMANDS["run"]), cmd_run)
    p.add_argument("--seed", type=int, help="random seed (default: the scenario's)")
    p.add_argument("--backend", choices=("memory", "postgres"), help="default: the scenario's")
    _dsn(p, "PostgreSQL DSN for --backend postgres")
    _flag(p, "--keep-schema", "postgres: keep the run's schema for inspection")
    _sql(p)
    _out(p, "events, leases, jobs, summary.json, scenario.toml and timeline.png", tables=True)
    _flag(
        p,
        "--no-heartbeat-records",
        "leave routine heartbeats out of the event log (for long runs; renewals after a lapse and "
        "the leases still held at the end stay)",
    )

    p = _scenario(sub.add_parser("live", help=COMMANDS["live"]), cmd_live)
    p.add_argument("--duration", type=float, required=True, metavar="SECONDS", help="wall seconds")
    p.add_argument("--time-scale", type=float, default=1.0, metavar="F", help=TIME_SCALE)
    p.add_argument("--seed", type=int, help="seed of the faults and jobs (default: the scenario's)")
    _dsn(p, "PostgreSQL DSN")
    _sql(p)
    p.add_argument("--compare-seeds", type=int, default=0, metavar="N", help=COMPARE_SEEDS)
    _out(p, "the run's tables, summary.json, timeline.png, comparison.csv/.png", tables=True)

    p = sub.add_parser("demo", help=COMMANDS["demo"])
    _out(p, "the figures and summary.csv (default: out/demo)", default=Path("out/demo"))
    p.set_defaults(command=cmd_demo)

    p = sub.add_parser("advise", help=COMMANDS["advise"])
    p.add_argument("durations", metavar="DURATIONS", help="CSV of processing seconds, or 'sample'")
    p.add_argument("--column", help="the CSV column of durations (when several hold numbers)")
    p.add_argument("--unit", choices=("s", "ms", "us"), default="s", help="of the durations (s)")
    p.add_argument("--pause-unit", choices=("s", "ms", "us"), default="s", help="of --pauses (s)")
    p.add_argument(
        "--prefer", choices=("safety", "recovery", "balanced"), default="balanced", help=PREFER
    )
    for flag, kind, default, metavar, text in ADVISE_OPTIONS:
        text += "" if default is None else f" (default: {default:g})"
        p.add_argument(flag, type=kind, default=default, metavar=metavar, help=text)
    _flag(p, "--no-verify", "skip the simulated evidence sweep")
    p.add_argument("--as", dest="queue", metavar="QUEUE", help=AS)
    report = "advice, assumptions, risk, trade-off chart, evidence"
    files = "advice.txt, candidates.csv, evidence.csv, scenario.toml (--as: settings-QUEUE.txt)"
    _out(p, files, report=report)
    p.set_defaults(command=cmd_advise)

    p = _scenario(sub.add_parser("review", help=COMMANDS["review"]), cmd_review)
    p.add_argument("--seeds", type=int, default=3, metavar="N", help=SEEDS)
    _flag(p, "--no-variants", "judge on the scenario's own runs only")
    p.add_argument("--hunt", type=float, default=0.0, metavar="SECONDS", help=HUNT)
    _sql(p, dsn=True)
    _out(p, "review.csv, review.txt and review.png", report="settings, verdicts, timeline")

    p = _scenario(sub.add_parser("sweep", help=COMMANDS["sweep"]), cmd_sweep)
    p.add_argument("--grid", action="append", default=[], metavar="KEY=V1,V2,...", help=GRID)
    p.add_argument("--replications", type=int, default=5, metavar="N", help="runs per grid point")
    p.add_argument("--seed", type=int, default=0, help="sweep seed (default: 0)")
    _flag(p, "--serial", "run in this process instead of a process pool")
    _sql(p, dsn=True)
    _out(p, "runs.csv, aggregate.csv and sweep.parquet (SweepResult.load reads it)")

    p = _scenario(sub.add_parser("hunt", help=COMMANDS["hunt"]), cmd_hunt)
    for flag, kind, default, text in HUNT_OPTIONS:
        p.add_argument(flag, type=kind, default=default, metavar=flag[2:].upper(), help=text)
    p.add_argument("--invariant", action="append", metavar="NAME", help="hunt this one (repeat)")
    p.add_argument("--fault", action="append", metavar="KIND", help="only these kinds (repeat)")
    _flag(p, "--exhaustive", "walk the bounded grid alone; a certificate if it ends clean")
    _flag(p, "--no-postgres", "do not replay the findings on PostgreSQL")
    p.add_argument("--dask", metavar="ADDRESS", help="search on this Dask scheduler's workers")
    _sql(p, dsn=True)
    _out(p, "per invariant NAME.toml, .txt, .png, test_NAME.py; hunt.txt", report="timelines")
    return parser


def _scenario(p: argparse.ArgumentParser, command) -> argparse.ArgumentParser:
    p.add_argument("scenario", metavar="SCENARIO", help="preset name or path to a .toml file")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help=SET)
    p.set_defaults(command=command)
    return p


def _flag(p: argparse.ArgumentParser, flag: str, text: str) -> None:
    p.add_argument(flag, action="store_true", help=text)


def _dsn(p: argparse.ArgumentParser, what: str) -> None:
    p.add_argument("--dsn", help=f"{what} (default: $LEASELAB_DSN, $DATABASE_URL, else embedded)")


def _sql(p: argparse.ArgumentParser, *, dsn: bool = False) -> None:
    p.add_argument("--sql", type=Path, metavar="DIR", help=SQL)
    _flag(p, "--own-rights", OWN_RIGHTS)
    if dsn:
        _dsn(p, "PostgreSQL DSN for --sql")


def _out(p, files: str, *, tables=False, report: str | None = None, default=None) -> None:
    p.add_argument("--out", type=Path, default=default, metavar="DIR", help=f"write {files} here")
    if tables:
        p.add_argument("--format", choices=("csv", "parquet"), default="csv", help="of the tables")
    if report is not None:
        text = f"write one self-contained HTML report ({report})"
        p.add_argument("--report", type=Path, metavar="FILE.html", help=text)
    _flag(p, "--force", "write into a non-empty --out" + (" or over --report" if report else ""))


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
    print(dumps(_resolve(args.scenario, parse_assignments(args.set))[0]), end="")
    return 0


def cmd_run(args) -> int:
    from sim.cli.run_text import format_kept_schema, format_run
    from sim.runner import run as simulate

    overrides = parse_assignments(args.set)
    if args.no_heartbeat_records:
        overrides["record_heartbeats"] = False
    scenario, sql = _resolve(args.scenario, overrides, args.sql)
    _check_files(args)
    # the user's choice (memory: no --sql), validated by _resolve when it came with --set
    backend = args.backend or (scenario.backend if "backend" in overrides else None)
    options = {"seed": args.seed, "dsn": args.dsn, "keep_schema": args.keep_schema}
    run = simulate(scenario, backend, **options, sql=sql)
    if run.backend != "postgres" and (args.dsn or args.keep_schema):
        ignored = "--dsn and --keep-schema only apply to the postgres backend; ignored"
        warnings.warn(ignored, LeaseWarning, stacklevel=1)
    report = run.check()
    print(format_run(run, report))
    if run.kept_schema:
        print(f"\n{format_kept_schema(run, args.dsn)}")
    _save(args, partial(run.save, format=args.format, report=report))
    return 0 if report.ok else 1


def cmd_live(args) -> int:
    from sim.cli.run_text import format_run
    from sim.comparisons.live_vs_simulated import compare
    from sim.live_mode import live
    from sim.live_mode.budget import describe_guard
    from sim.live_mode.runner import check_timing

    scenario, sql = _resolve(args.scenario, parse_assignments(args.set), args.sql)
    if not 0 <= args.compare_seeds <= MAX_COMPARE_SEEDS:
        raise ConfigError(
            f"--compare-seeds: must be a whole number from 0 to {MAX_COMPARE_SEEDS:,}, "
            f"got {args.compare_seeds}"
        )
    check_timing(args.duration, args.time_scale)  # before anything starts
    _check_files(args)
    options = {"duration": args.duration, "time_scale": args.time_scale, "dsn": args.dsn}
    run = live(scenario, **options, seed=args.seed, sql=sql)
    report = run.check()
    print(format_run(run, report))
    print(describe_guard(run))
    comparison = None
    if args.compare_seeds:
        comparison = compare(run, args.compare_seeds, sql=args.sql, dsn=args.dsn)
        print(f"\n{comparison}")  # ends with the reasons the live run is unsound, if any
    else:
        for reason in run.unsound:
            print(f"warning: the live run is unsound: {reason}")
    for reason in run.inconclusive:
        print(f"inconclusive: {reason}")
    if run.inconclusive:
        print(
            "the live run is inconclusive: statements were still in flight at its end, so its "
            "invariants cannot say what they would have done (a longer --duration, or a statement "
            "that finishes)"
        )
    _save(
        args, partial(run.save, format=args.format, report=report), comparison and comparison.save
    )
    return 0 if report.ok and not run.inconclusive else 1


def cmd_demo(args) -> int:
    from sim.demo import demo

    _check_files(args)
    result = demo()
    print(result)
    _save(args, result.save)
    return 0 if result.ok else 1


def cmd_advise(args) -> int:
    from sim.advice.advisor import advise, command_line_arguments
    from sim.advice.queue_terms import check_queue, in_queue_terms
    from sim.advice.text import evidence_text

    arguments = command_line_arguments(args)
    queue = check_queue(args.queue) if args.queue is not None else None
    _check_files(args)
    advice = advise(args.durations, **{**arguments, "verify": False})
    settings = in_queue_terms(advice, queue) if queue else None
    print(advice.text(settings), flush=True)  # the answer, before the simulations run
    if arguments["verify"]:
        advice.verify(replications=arguments["replications"], seed=arguments["seed"])
        evidence = evidence_text(advice)
        if evidence:
            print("\n".join(evidence))
        if advice.recovery_source == "simulated":  # the evidence moved the answer's recovery
            print(f"  with the evidence: {advice.headline()}")
        settings = in_queue_terms(advice, queue) if queue else None
    if settings is not None:
        print(f"\n{settings}")
    _save(args, advice.save, settings and settings.save)
    if args.report is not None:
        print(f"wrote {advice.save_report(args.report, settings=settings)}")
    return 0


def cmd_review(args) -> int:
    from sim.checklist.design_review import review

    if not 1 <= args.seeds <= MAX_RUNS:
        raise ConfigError(f"--seeds {args.seeds}: must be from 1 to {MAX_RUNS:,}")
    overrides = parse_assignments(args.set)
    _check_files(args)
    seeds = range(1, args.seeds + 1)
    result = review(
        args.scenario,
        seeds=seeds,
        variants=not args.no_variants,
        sql=args.sql,
        dsn=args.dsn,
        **overrides,
    )
    print(result)
    hunted = None
    if args.hunt:
        from sim.hunting import hunt

        options: dict[str, Any] = {**overrides, "sql": args.sql, "dsn": args.dsn}
        hunted = hunt(args.scenario, time=args.hunt, postgres=False, **options)
        print(f"\n{hunted}")
    if args.report is not None:
        print(f"wrote {result.save_report(args.report, hunt=hunted)}")
    _save(args, result.save)
    return 0


def cmd_sweep(args) -> int:
    from sim.sweeps import sweep

    if args.replications < 1:
        raise ConfigError(f"--replications {args.replications}: must be at least 1")
    overrides = {**parse_assignments(args.set), "seed": args.seed}  # --seed: the sweep's
    grid = parse_grid(args.grid)
    _check_files(args)
    executor = "serial" if args.serial else None
    options = {"executor": executor, "sql": args.sql, "dsn": args.dsn}
    result = sweep(args.scenario, grid, args.replications, **options, **overrides)
    print(result)
    _save(args, result.save)
    return 0


def cmd_hunt(args) -> int:
    from sim.cli.hunt_command import hunt_command

    return hunt_command(args, parse_assignments(args.set), _check_files, _save)


def _check_files(args) -> None:
    """Refuse, before anything runs, an --out or --report that would overwrite the user's files."""
    if args.out is not None:
        check_directory(args.out, args.force, option="--out", force="--force")
    if getattr(args, "report", None) is not None:
        check_report(args.report, args.force, option="--report", force="--force")


def _save(args, *saves) -> None:
    """With --out: each save(directory) there (the directory was checked before anything ran)."""
    if args.out is not None:
        written = [path for save in saves if save for path in save(args.out, overwrite=True)]
        print(f"\nwrote {args.out}/: {', '.join(p.name for p in written)}")


def _resolve(name: str, overrides: dict, sql=None):
    """(the scenario SCENARIO names with the --set overrides, over the settings of the queue
    directory `sql` (queue.toml) if any; that queue, its settings settled, or None)."""
    if sql is not None and overrides.get("backend") != "memory":  # memory: refused by the run
        from sim.db.queue.directory import loaded

        sql = loaded(sql)
    return prepared(name, overrides, queue=sql)


if __name__ == "__main__":
    sys.exit(main())
