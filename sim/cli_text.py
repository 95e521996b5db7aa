"""The command line's help texts and the advise command's arguments (sim/__main__.py parses and
prints; these are its words, kept apart so that the parser reads as a list of commands)."""

import argparse

from sim.advice_settings import QUEUES

ADVISE_OPTIONS = (  # flag, type, default (shown unless None), metavar, help
    ("--target", float, None, "P", "false-expiry probability per job (default: 0.001)"),
    ("--target-per-day", float, None, "N", "false expiries a day to stay under, at --arrival-rate"),
    ("--pause-rate", float, 2.0, "R", "stop-the-world pauses per worker-hour"),
    ("--pause-p99", float, 5.0, "S", "p99 of pause durations (s), lognormal with median S/10"),
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
PREFER = "how the choice weighs recovery against risk; the advice states the rule (balanced)"
COMMANDS = {  # name: what it does (python -m sim --help)
    "list": "the named scenarios, one line each",
    "show": "print a scenario's full settings as TOML",
    "run": "run a scenario; print its metrics and invariant report",
    "live": "run a scenario with real worker processes on PostgreSQL; compare with the simulation",
    "demo": "four runs of three teaching scenarios: figures and a summary table",
    "advise": "recommend lease TTL, heartbeat and watcher intervals for observed durations",
    "review": "design-review checklist of a scenario, with evidence measured by simulation",
    "sweep": "run a grid of settings x replications; print means with 95%% intervals",  # argparse: %%
}
SET = "override a setting, e.g. policy.lease_ttl=20 (values are TOML; bare words are strings)"
SQL = "your own queue: a directory with queries.sql (and schema.sql); runs on PostgreSQL"
OWN_RIGHTS = (
    "with --sql: run your SQL with the DSN user's own rights, not in a role of the run's own "
    "that may touch only the run's schema (for a user who cannot create roles)"
)
GRID = "a setting and its values, e.g. policy.watcher_interval=5,15,30; repeatable"
TIME_SCALE = "wall seconds per scenario second (0.1 plays an hour in 6 minutes; default 1)"
SEEDS = "runs of the scenario and of each variant: seeds 1..N (default: 3)"
COMPARE_SEEDS = "also simulate N seeds of the scenario and compare (default 0: no comparison)"
ADVISE_FILES = (
    "advice.txt, candidates.csv, evidence.csv, scenario.toml (with --as: settings-QUEUE.txt)"
)
ADVISE_REPORT = "advice, assumptions, risk, trade-off chart, evidence"
AS = "also answer in that queue's own settings and units: " + ", ".join(QUEUES)


def add_advise_arguments(p: argparse.ArgumentParser) -> None:
    """The advise command's durations, reading options, model options and --as."""
    p.add_argument("durations", metavar="DURATIONS", help="CSV of processing seconds, or 'sample'")
    p.add_argument("--column", help="the CSV column of durations (when several hold numbers)")
    p.add_argument("--unit", choices=("s", "ms", "us"), default="s", help="of the durations (s)")
    p.add_argument(
        "--prefer", choices=("safety", "recovery", "balanced"), default="balanced", help=PREFER
    )
    for flag, kind, default, metavar, text in ADVISE_OPTIONS:
        text += "" if default is None else f" (default: {default:g})"
        p.add_argument(flag, type=kind, default=default, metavar=metavar, help=text)
    p.add_argument("--no-verify", action="store_true", help="skip the simulated evidence sweep")
    p.add_argument("--as", dest="queue", metavar="QUEUE", help=AS)
