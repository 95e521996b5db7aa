"""`python -m sim hunt SCENARIO ...`: the command's body (sim/cli/main.py parses its options).
Exit 1 when an invariant broke, 0 when none did within the scope and the time, 2 on bad input."""

from __future__ import annotations

import sys

from sim.errors import ConfigError


def hunt_command(args, overrides: dict, check_files, save) -> int:
    from sim.hunting.api import hunt

    check_files(args)

    def announce() -> None:  # once the search runs: a Ctrl-C before it only interrupts
        print(
            f"hunting {args.scenario} for up to {args.time:g} s (Ctrl-C stops it and reports)",
            file=sys.stderr,
            flush=True,
        )

    executor = _dask(args.dask) if args.dask else None
    result = hunt(
        args.scenario,
        sql=args.sql,
        dsn=args.dsn,
        time=args.time,
        workers=args.workers,
        jobs=args.jobs,
        max_faults=args.max_faults,
        exhaustive=args.exhaustive,
        seed=args.seed,
        invariant=args.invariant,
        kinds=args.fault,
        parallel=args.parallel,
        executor=executor,
        schedules=args.schedules,
        postgres=not args.no_postgres,
        announce=announce,
        **overrides,
    )
    print(result)
    save(args, result.save)
    if args.report is not None:
        print(f"wrote {result.save_report(args.report, overwrite=True)}")
    return result.exit_code


def _dask(address: str):
    """A Dask client's executor for the scheduler at `address`."""
    try:
        from distributed import Client
    except ImportError:
        raise ConfigError(
            "--dask: needs the distributed package (pip install 'dask[distributed]')"
        ) from None
    try:
        client = Client(address, timeout=10)
    except OSError as exc:
        raise ConfigError(f"--dask {address}: no Dask scheduler there ({exc})") from None
    return client.get_executor()
