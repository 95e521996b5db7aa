"""Parameter sweeps: a grid of scenario settings x replications, run on any concurrent.futures
Executor.

    import sim
    grid = {"policy.watcher_interval": [5, 15, 30, 60]}
    result = sim.sweep("crash-recovery", grid, replications=20)
    result.runs          # one row per run: grid keys, replication, seed, summary metrics
    result.aggregate()   # one row per grid point: <metric>_mean, _ci_low, _ci_high and n
    print(result)        # the means of the main metrics, per point
    result.save("watcher/")  # runs.csv, aggregate.csv, sweep.parquet; SweepResult.load("watcher/")

Seeds. The seed of a run depends only on (sweep seed, grid point, replication): it is drawn from
numpy's SeedSequence(seed, spawn_key=(hash of the point, replication)), where the hash is a stable
CRC-32 of the point's canonical JSON (keys sorted, numbers as floats). Adding points or
replications, or reordering the grid, never changes the seed, hence the result, of another run.

Execution. Runs go to the executor in chunks (about 16 per worker: few enough that the scenario
is pickled once per chunk rather than once per run, many enough that the workers finish close
together); only the summary metrics come back, never Run objects. The default executor is a
process pool over this machine's cores, kept for later sweeps (forked while this process runs a
single thread, else started with forkserver, which is safe in processes that run threads, such
as Jupyter or a Dask client); shutdown_pools() stops it. `executor="serial"` or `max_workers=1`
runs in this process. Any concurrent.futures.Executor works, including a Dask cluster's
`Client.get_executor()`. The result does not depend on the executor.

`sim.sweep` is the function; this module is sim.sweeps (`from sim.sweeps import SweepResult`).
"""

from __future__ import annotations

import atexit
import concurrent.futures as cf
import difflib
import itertools
import json
import math
import multiprocessing
import os
import threading
import time
import warnings
import zlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from sim.errors import ConfigError, expect_flag
from sim.scenario import limits
from sim.scenario.settings import LeaseWarning, Scenario, dumps, loads, prepared
from sim.support import output_paths
from sim.support.progress import Progress
from sim.theory.stats import summarize

FORMAT = "leaselab.sweep/1"
PARQUET = "sweep.parquet"  # the file of a saved sweep that load() reads
_METADATA_KEY = b"leaselab.sweep"
SHOWN = (  # the metrics str(result) prints the means of (aggregate() has every one)
    "double_claims",
    "false_expiries",
    "duplicate_db_effects",
    "duplicate_external_effects",
    "recovery_latency_mean",
    "lost_jobs",
)
_CHUNKS_PER_WORKER = 16  # small enough that the last chunks finish close together


# ---- seeds ---------------------------------------------------------------------------------------


def _canonical(value):
    """A JSON-able, type-stable form of a grid value (20 and 20.0 are the same point)."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, Mapping):
        return {str(k): _canonical(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_canonical(v) for v in value]
    return str(value)


def point_key(point: Mapping[str, object]) -> str:
    """The canonical text of a grid point: what its seeds are derived from."""
    return json.dumps(
        {k: _canonical(v) for k, v in point.items()}, sort_keys=True, separators=(",", ":")
    )


def run_seed(seed: int, point: Mapping[str, object], replication: int) -> int:
    """The scenario seed of one run: a function of (sweep seed, point, replication) alone."""
    key = zlib.crc32(point_key(point).encode("utf-8"))
    state = np.random.SeedSequence(int(seed), spawn_key=(key, int(replication))).generate_state(
        1, np.uint64
    )
    return int(state[0] >> np.uint64(1))  # 63 bits: fits an int64 column and a TOML integer


# ---- the grid ------------------------------------------------------------------------------------


def _plain(value):
    """numpy scalars and arrays -> Python values (the scenario validator wants int, float,
    str...)."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return [_plain(v) for v in value.tolist()]
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def _normalise_grid(grid: Mapping[str, Iterable] | None) -> dict[str, list]:
    if grid is None:
        return {}
    if not isinstance(grid, Mapping):
        raise ConfigError(
            f"grid: expected a dict of dotted key -> list of values, got {type(grid).__name__}"
        )
    out: dict[str, list] = {}
    for key, values in grid.items():
        if not isinstance(key, str) or not key:
            raise ConfigError(
                f"grid: keys must be dotted scenario keys like 'policy.lease_ttl', got {key!r}"
            )
        if key == "seed":
            raise ConfigError("grid: seed is set per run by sweep(seed=...); sweep other keys")
        if isinstance(values, str | bytes | Mapping) or not isinstance(values, Iterable):
            raise ConfigError(
                f"grid: {key}: expected a list of values, got {type(values).__name__} {values!r}"
            )
        values = [_plain(v) for v in values]
        if not values:
            raise ConfigError(f"grid: {key}: has no values")
        keys = [point_key({key: v}) for v in values]
        if len(set(keys)) != len(keys):
            raise ConfigError(f"grid: {key}: a value is listed twice")
        out[key] = values
    return out


def _points(grid: dict[str, list]) -> list[dict[str, object]]:
    keys = list(grid)
    return [
        dict(zip(keys, combo, strict=True)) for combo in itertools.product(*(grid[k] for k in keys))
    ]


def _column_value(value):
    """How a grid value appears in the runs table: scalars as themselves,
    tables and lists as JSON."""
    if isinstance(value, Mapping | list):
        return json.dumps(value, sort_keys=True)
    return value


# ---- running -------------------------------------------------------------------------------------


def _run_chunk(
    scenarios: dict[int, Scenario],
    tasks: list[tuple[int, int, int]],
    metrics: tuple[str, ...] | None,
    sql=None,
    dsn: str | None = None,
) -> list[tuple[int, dict]]:
    """Run (task index, point index, seed) tasks; return (task index, summary metrics) per run."""
    from sim.runner import run

    out = []
    with warnings.catch_warnings():
        warnings.simplefilter(
            "ignore", LeaseWarning
        )  # already shown once, when the grid was validated
        for index, point, seed in tasks:
            scenario = scenarios[point]
            try:
                summary = run(scenario.replace(seed=seed), progress=False, sql=sql, dsn=dsn).summary
            except Exception as exc:
                exc.add_note(f"in sweep run {index} (grid point {point}, seed {seed})")
                raise
            values = {}
            for name, value in summary.items():
                if metrics is None or name in metrics:
                    values[name] = value.item() if isinstance(value, np.generic) else value
            out.append((index, values))
    return out


def cpu_count() -> int:
    """The cores this process may run on (its affinity on Linux): how wide the shared pool goes."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


_POOLS: dict[int, cf.ProcessPoolExecutor] = {}


def _start_method() -> str:
    """fork while this process has one thread (fast, and scripts need no __main__ guard); else
    forkserver, since forking a process that runs other threads (Jupyter, a Dask client) is
    unsafe."""
    methods = multiprocessing.get_all_start_methods()
    if "fork" in methods and threading.active_count() == 1:
        return "fork"
    return "forkserver" if "forkserver" in methods else "spawn"


def shared_pool(workers: int) -> cf.ProcessPoolExecutor:
    """The process pool kept for the life of this process, shared by sweeps, the review's runs and
    the schedule hunt (so runs in a loop do not restart it)."""
    pool = _POOLS.get(workers)
    if pool is None or getattr(pool, "_broken", False):
        context = multiprocessing.get_context(_start_method())
        if context.get_start_method() == "forkserver":
            context.set_forkserver_preload(["sim.sweeps", "sim.runner"])
        pool = _POOLS[workers] = cf.ProcessPoolExecutor(max_workers=workers, mp_context=context)
    return pool


def shutdown_pools(wait: bool = True) -> None:
    """Stop the worker processes of the default pool (the next sweep starts a new one)."""
    for pool in _POOLS.values():
        pool.shutdown(wait=wait, cancel_futures=True)
    _POOLS.clear()


atexit.register(shutdown_pools, wait=False)


def kill_shared_pool(pool: cf.Executor) -> None:
    """Kill the workers of `pool` if it is a shared pool, mid-run: after Ctrl-C or SIGTERM the
    interpreter's exit would otherwise wait for their runs, minutes for long jobs (SIGTERM reaches
    this process only). A pool the caller gave is left alone."""
    for workers, shared in list(_POOLS.items()):
        if shared is pool:
            del _POOLS[workers]
            processes = getattr(pool, "_processes", None) or {}  # no public handle before 3.14
            for process in list(processes.values()):
                process.kill()
            pool.shutdown(wait=False, cancel_futures=True)


def _chunks(tasks: list, pieces: int) -> list[list]:
    size = max(1, math.ceil(len(tasks) / max(1, pieces)))
    return [tasks[i : i + size] for i in range(0, len(tasks), size)]


def sweep(
    scenario: Scenario | str,
    grid: Mapping[str, Iterable] | None = None,
    replications: int = 1,
    seed: int = 0,
    *,
    executor: cf.Executor | str | None = None,
    max_workers: int | None = None,
    progress: bool | None = None,
    metrics: Sequence[str] | None = None,
    sql=None,
    dsn: str | None = None,
    **overrides,
) -> SweepResult:
    """Run every point of `grid` (the full factorial) `replications` times; one summary row per run.

    scenario: a Scenario, preset name or TOML path; `overrides`, dotted keys set on it before the
    grid (as in sim.run: sweep("baseline", grid, **{"policy.workers": 8})). grid: {dotted key:
    [values]}, e.g. {"policy.lease_ttl": [20, 30], "policy.heartbeat_interval": [5, 10]}; every
    point is validated before anything runs (ConfigError names the bad key or value). executor: None
    (a process pool over `max_workers`, default all cores), "serial" (this process), or any
    concurrent.futures.Executor, which is used but not shut down. metrics: summary metrics to keep
    (default all). progress: True shows a tqdm bar, False never, None once the sweep takes > 2 s
    where someone watches (never in batch output: sim.support.progress).
    sql: a queue directory whose statements replace Lease Lab's (see sim.run); every run is then on
    PostgreSQL (`dsn`, else the embedded server), and the definition is checked before any runs.
    """
    if sql is not None:
        from sim.db.queue.directory import loaded

        sql = loaded(sql)
    base, sql = prepared(scenario, overrides, queue=sql)  # queue.toml under overrides and grid
    replications, seed = _checked_counts(replications, seed)
    grid = _normalise_grid(grid)
    _check_run_count(grid, replications)
    checked_metrics = _checked_metrics(base, metrics)
    points = _points(grid)
    scenarios = {i: base.with_overrides(point) if point else base for i, point in enumerate(points)}
    if sql is not None:
        from sim.runner import checked_queue

        # started and checked here once, not in every worker process
        sql, dsn = checked_queue(
            sql,
            dsn,
            scenarios.values(),
            memory="memory" in [*grid.get("backend", []), overrides.get("backend")],
        )

    tasks = [
        (i * replications + r, i, run_seed(seed, point, r))
        for i, point in enumerate(points)
        for r in range(replications)
    ]
    serial = _is_serial(executor, max_workers)
    expect_flag("progress", progress, none_ok=True)
    start = time.perf_counter()
    bar = Progress(len(tasks), progress, f"sweep {base.name}", unit="run")
    work = _Work(scenarios, checked_metrics, sql, dsn)
    try:
        if serial:
            results = work.run_here(tasks, bar)
        else:
            results = work.run_on(_executor_for(executor, max_workers), max_workers, tasks, bar)
    finally:
        bar.close()
    wall = time.perf_counter() - start
    return SweepResult(
        runs=_runs_table(tasks, points, results, replications, list(grid), checked_metrics),
        scenario=base,
        grid=grid,
        replications=replications,
        seed=seed,
        wall_seconds=wall,
        queue=None if sql is None else str(sql.path),
    )


# ---- the sweep's arguments -----------------------------------------------------------------------


def _checked_counts(replications: int, seed: int) -> tuple[int, int]:
    """replications (>= 1) and seed (>= 0) as ints; ConfigError naming the one that is not."""
    if (
        isinstance(replications, bool)
        or not isinstance(replications, int | np.integer)
        or replications < 1
    ):
        raise ConfigError(f"replications: must be a whole number >= 1, got {replications!r}")
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
        raise ConfigError(f"seed: must be a whole number >= 0, got {seed!r}")
    return int(replications), int(seed)


def _check_run_count(grid: dict[str, list], replications: int) -> None:
    """ConfigError when points x replications passes limits.MAX_RUNS."""
    points_n = math.prod(len(values) for values in grid.values())
    if points_n * replications > limits.MAX_RUNS:
        raise ConfigError(
            f"replications: {points_n:,} grid points x {replications:,} replications = "
            f"{points_n * replications:,} runs, over the limit of {limits.MAX_RUNS:,}; "
            "split the sweep or use fewer values"
        )


def _checked_metrics(base: Scenario, metrics: Sequence[str] | None) -> tuple[str, ...] | None:
    """The metric names to keep, once each (None: all); ConfigError for one the summary lacks."""
    if metrics is None:
        return None
    if isinstance(metrics, str):
        metrics = [metrics]
    if not isinstance(metrics, Iterable) or not all(isinstance(m, str) for m in metrics):
        raise ConfigError(f"metrics: expected summary metric names, got {metrics!r:.80}")
    names = tuple(dict.fromkeys(metrics))
    _check_metric_names(base, names)
    return names


def _is_serial(executor: cf.Executor | str | None, max_workers: int | None) -> bool:
    """Whether the runs go in this process; ConfigError for a bad max_workers or executor."""
    if max_workers is not None and (
        isinstance(max_workers, bool)
        or not isinstance(max_workers, int | np.integer)
        or max_workers < 1
    ):
        raise ConfigError(f"max_workers: must be at least 1, got {max_workers!r}")
    serial = executor == "serial" or (executor is None and (max_workers or cpu_count()) <= 1)
    if (isinstance(executor, str) and executor != "serial") or not (
        executor is None or isinstance(executor, str) or callable(getattr(executor, "submit", None))
    ):
        raise ConfigError(
            f"executor: {executor!r:.80} is not 'serial' or a concurrent.futures.Executor"
        )
    return serial


def _executor_for(executor: cf.Executor | str | None, max_workers: int | None) -> cf.Executor:
    """The user's executor, else the default process pool ("serial" never comes here)."""
    if executor is None or isinstance(executor, str):
        return shared_pool(max_workers or cpu_count())
    return executor


# ---- executing and collecting --------------------------------------------------------------------


@dataclass(frozen=True)
class _Work:
    """What every chunk of runs needs: the scenario of each point, the metrics kept, the queue."""

    scenarios: dict[int, Scenario]
    metrics: tuple[str, ...] | None
    sql: object
    dsn: str | None

    def _chunk_args(self, chunk: list[tuple[int, int, int]]) -> tuple:
        needed = {p: self.scenarios[p] for _, p, _ in chunk}
        return needed, chunk, self.metrics, self.sql, self.dsn

    def run_here(self, tasks: list[tuple[int, int, int]], bar: Progress) -> dict[int, dict]:
        """Every task in this process, in chunks of about a tenth (so that the bar moves)."""
        results: dict[int, dict] = {}
        for chunk in _chunks(tasks, max(1, len(tasks) // 10)):
            results.update(_run_chunk(*self._chunk_args(chunk)))
            bar.tick(len(chunk))
        return results

    def run_on(
        self,
        pool: cf.Executor,
        max_workers: int | None,
        tasks: list[tuple[int, int, int]],
        bar: Progress,
    ) -> dict[int, dict]:
        """Every task on `pool`, ~_CHUNKS_PER_WORKER chunks per worker; pending ones are cancelled
        when one fails or the sweep is interrupted."""
        workers = getattr(pool, "_max_workers", None) or max_workers or cpu_count()
        futures = {}
        for chunk in _chunks(tasks, workers * _CHUNKS_PER_WORKER):
            futures[pool.submit(_run_chunk, *self._chunk_args(chunk))] = len(chunk)
        results: dict[int, dict] = {}
        pending = set(futures)
        try:
            while pending:
                done, pending = cf.wait(pending, timeout=0.5, return_when=cf.FIRST_COMPLETED)
                for future in done:
                    results.update(future.result())
                bar.tick(sum(futures[f] for f in done))
        except BaseException as exc:
            for future in pending:
                future.cancel()
            if isinstance(exc, KeyboardInterrupt):  # Ctrl-C, or SIGTERM (support/interrupts.py)
                kill_shared_pool(pool)
            raise
        return results


def _runs_table(
    tasks: list[tuple[int, int, int]],
    points: list[dict[str, object]],
    results: dict[int, dict],
    replications: int,
    keys: list[str],
    metrics: tuple[str, ...] | None,
) -> pd.DataFrame:
    """One row per run, in task order: the point's values, replication, seed, then the metrics."""
    rows = []
    for index, point, run_seed_ in tasks:
        values = results[index]
        row = {key: _column_value(value) for key, value in points[point].items()}
        row["replication"] = index - point * replications
        row["seed"] = run_seed_
        row.update(values)
        rows.append(row)
    return _tidy(pd.DataFrame(rows), keys, metrics)


def _tidy(frame: pd.DataFrame, keys: list[str], metrics: tuple[str, ...] | None) -> pd.DataFrame:
    """Columns in a fixed order; a statement kind a run never issued has a rate of 0, not NaN."""
    fixed = [*keys, "replication", "seed"]
    others = [c for c in frame.columns if c not in fixed]
    if metrics is not None:
        for name in metrics:
            if name not in frame.columns:
                frame[name] = 0.0  # only db_<kind>_per_s can be missing from every run
        others = list(metrics)
    plain = [c for c in others if not (c.startswith("db_") and c.endswith("_per_s"))]
    rates = sorted(c for c in others if c.startswith("db_") and c.endswith("_per_s"))
    for c in rates:
        frame[c] = frame[c].fillna(0.0).astype(float)
    frame = frame[fixed + plain + rates]
    return frame.reset_index(drop=True)


def _check_metric_names(scenario: Scenario, metrics: tuple[str, ...]) -> None:
    known = _summary_names(scenario)
    for name in metrics:
        if name in known or (name.startswith("db_") and name.endswith("_per_s")):
            continue
        close = difflib.get_close_matches(name, sorted(known), n=1)
        hint = f"; did you mean {close[0]}?" if close else f"; metrics: {', '.join(sorted(known))}"
        raise ConfigError(f"metrics: {name!r} is not a summary metric{hint}")


def _summary_names(scenario: Scenario) -> set[str]:
    """The summary's metric names, from a run of a few simulated milliseconds."""
    from sim.runner import run

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LeaseWarning)
        tiny = scenario.replace(horizon=0.001, backend="memory", faults=type(scenario.faults)())
        return {n for n in run(tiny, progress=False).summary.index if not n.startswith("db_")}


# ---- results -------------------------------------------------------------------------------------


@dataclass
class SweepResult:
    """The runs of a sweep (one row each) plus what is needed to understand and reload them."""

    runs: pd.DataFrame
    scenario: Scenario
    grid: dict[str, list]
    replications: int
    seed: int
    wall_seconds: float = field(default=float("nan"), compare=False)
    queue: str | None = None  # the user's queue directory whose SQL ran, None: Lease Lab's

    def __repr__(self) -> str:
        points = len(self.runs) // max(1, self.replications)
        return (
            f"SweepResult({self.scenario.name!r}, {points} points x {self.replications} "
            f"replications, keys={list(self.grid)}, seed={self.seed})"
        )

    def __str__(self) -> str:
        """How many runs took how long, then each point's n and the means of SHOWN metrics."""
        table = self.aggregate()
        shown = [
            c
            for c in table.columns
            if c in self.grid or c == "n" or c.endswith("_mean") and c[:-5] in SHOWN
        ]
        queue = f" on the queue in {self.queue}" if self.queue else ""
        head = f"{self.scenario.name}: {len(self.runs)} runs in {self.wall_seconds:.1f} s{queue}"
        return f"{head}\n{table[shown].to_string(index=False, float_format=lambda v: f'{v:.3g}')}"

    @property
    def keys(self) -> list[str]:
        """The swept dotted keys (the runs table's first columns)."""
        return list(self.grid)

    @property
    def metrics(self) -> list[str]:
        """The metric columns of the runs table."""
        fixed = {*self.grid, "replication", "seed"}
        return [c for c in self.runs.columns if c not in fixed]

    def aggregate(
        self, metrics: Sequence[str] | None = None, confidence: float = 0.95
    ) -> pd.DataFrame:
        """One row per grid point, in grid order: the keys, n, then <metric>_mean, _ci_low,
        _ci_high.

        Computed by sim.theory.stats.summarize, whose module docstring gives the semantics once: `n`
        is the number of runs at the point; missing values (e.g. a recovery latency in a run without
        crashes) are left out of that metric's mean and Student-t interval; fewer than two -> NaN.
        """
        numeric = [c for c in self.metrics if pd.api.types.is_numeric_dtype(self.runs[c])]
        if metrics is None:
            metrics = numeric
        else:
            metrics = [metrics] if isinstance(metrics, str) else list(metrics)
            for name in metrics:
                if name not in numeric:
                    close = difflib.get_close_matches(name, numeric, n=1)
                    hint = f"; did you mean {close[0]}?" if close else ""
                    raise ConfigError(
                        f"metrics: {name!r} is not a numeric metric of this sweep{hint}"
                    )
        return summarize(self.runs, self.keys, metrics, confidence, sort=False)

    # ---- files ---------------------------------------------------------------------------------

    def save(self, directory: str | Path, *, overwrite: bool = False) -> list[Path]:
        """Write runs.csv (one row per run), aggregate.csv (aggregate()) and sweep.parquet (the runs
        with the scenario as TOML, the grid, seed and replications in its metadata: what load()
        reads) into `directory` (created if missing; one that holds files only with `overwrite`)."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        out = output_paths.directory(directory, overwrite)
        written = [out / "runs.csv", out / "aggregate.csv", out / PARQUET]
        self.runs.to_csv(written[0], index=False)
        self.aggregate().to_csv(written[1], index=False)
        table = pa.Table.from_pandas(self.runs, preserve_index=False)
        meta = {
            "format": FORMAT,
            "scenario": dumps(self.scenario),
            "grid": self.grid,
            "replications": self.replications,
            "seed": self.seed,
            "queue": self.queue,
        }
        from sim import __version__

        meta["leaselab"] = __version__
        table = table.replace_schema_metadata(
            {**(table.schema.metadata or {}), _METADATA_KEY: json.dumps(meta).encode("utf-8")}
        )
        pq.write_table(table, written[2])
        return written

    @classmethod
    def load(cls, path: str | Path) -> SweepResult:
        """A sweep saved by save() (its directory, or the sweep.parquet in it): runs, scenario,
        grid, seed and replications, without re-running."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        path = Path(path)
        if path.is_dir():
            path = path / PARQUET
        try:
            table = pq.read_table(path)
        except FileNotFoundError:
            raise ConfigError(f"{path}: no such file") from None
        except (OSError, pa.ArrowException) as exc:
            raise ConfigError(f"{path}: not a readable Parquet file ({exc})") from None
        raw = (table.schema.metadata or {}).get(_METADATA_KEY)
        if raw is None:
            raise ConfigError(
                f"{path}: not a Lease Lab sweep (no {_METADATA_KEY.decode()} metadata)"
            )
        meta = json.loads(raw)
        if meta.get("format") != FORMAT:
            raise ConfigError(f"{path}: sweep format {meta.get('format')!r}, expected {FORMAT}")
        runs = table.replace_schema_metadata(None).to_pandas()
        scenario = loads(meta["scenario"], f"{path} (scenario)")
        return cls(
            runs=runs,
            scenario=scenario,
            grid=meta["grid"],
            replications=int(meta["replications"]),
            seed=int(meta["seed"]),
            queue=meta.get("queue"),
        )
