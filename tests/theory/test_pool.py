"""sim.theory.pool: what the workers can carry, measured against the simulation; a load above it is
refused with one line naming --workers and the capacity, never advised; from 80% the advice
warns."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

import sim
from sim.advice.advisor import advise
from sim.cli.main import main
from sim.errors import ConfigError
from sim.scenario.dists import Dist
from sim.scenario.settings import LeaseWarning
from sim.theory import closed_forms
from sim.theory.pool import ROUND_TRIPS_PER_JOB, Pool


def _throughput(advice, rate: float, jobs: int, seed: int) -> float:
    """Completions per second while a backlog keeps every worker busy (after a 50 s warm-up)."""
    run = sim.run(advice.scenario(jobs=jobs, arrival_rate=rate, seed=seed))
    events = run.events
    done = events.loc[events["kind"] == "complete", "t"].to_numpy()
    end = jobs / rate  # the arrivals, hence the backlog, last this long
    return float(((done > 50) & (done <= end)).sum() / (end - 50))


@pytest.mark.parametrize("crash_rate", [0.0, 60.0])
def test_capacity_is_what_the_workers_complete_under_a_backlog(crash_rate):
    """1 s jobs, 4 workers, 2 ms statements: a worker spends 1 s + 6 round trips = 1.012 s a job, so
    the pool carries 3.953 jobs/s. With 60 crashes per worker-hour, each away 5 s and redoing half a
    job on average: 4 (1 - 60 x 5 / 3600) / (1.012 (1 + 60 x 0.5 / 3600)) = 3.593 jobs/s."""
    advice = advise(np.full(100, 1.0), pause_rate=0, crash_rate=crash_rate, workers=4, verify=False)
    pool = advice.inputs["pool"]
    expected = 4 * (1 - crash_rate * 5 / 3600) / (1.012 * (1 + crash_rate * 0.5 / 3600))
    assert ROUND_TRIPS_PER_JOB == 6 and pool.capacity == pytest.approx(expected, rel=1e-9)
    measured = np.mean([_throughput(advice, 6.0, 3000, seed) for seed in (1, 2)])
    # without crashes every step is deterministic: the model's own count of round trips decides
    assert measured == pytest.approx(pool.capacity, rel=0.001 if not crash_rate else 0.03)
    if not crash_rate:  # 5 round trips would be 0.2% off, 7 as much the other way
        for trips in (5, 7):
            assert abs(measured - 4 / (1 + trips * 0.002)) > 0.001 * measured


def test_a_rate_the_workers_cannot_carry_is_refused_with_the_pool_it_needs():
    """The issue's case: the sample at 3 jobs/s on 4 workers is 169% of their capacity."""
    with pytest.raises(ConfigError) as caught:
        advise("sample", arrival_rate=3, verify=False)
    pool = Pool(4, advise("sample", verify=False).durations, 0.002, 1.0, 5.0)
    need = math.ceil(3 / (pool.per_worker * 0.7))
    assert str(caught.value) == (
        f"workers: 4 workers carry {pool.capacity:.3g} jobs/s (mean job 2.24 s), but the arrival "
        f"rate is 3 jobs/s, {3 / pool.capacity:.0%} of that; {need} workers (--workers {need}) "
        f"would be {3 / (need * pool.per_worker):.0%} busy, or give a lower arrival rate"
    )
    assert f"{pool.capacity:.3g}" == "1.78" and need == 10


def test_the_command_line_refuses_it_in_one_line_and_prints_no_daily_figure(capsys):
    assert main(["advise", "sample", "--arrival-rate", "3", "--no-verify"]) == 2
    printed = capsys.readouterr()
    err = printed.err.strip().splitlines()
    assert printed.out == "" and len(err) == 1
    assert (
        err[0].startswith("error: workers: 4 workers carry 1.78 jobs/s")
        and "--workers 10" in err[0]
    )


def test_a_bimodal_export_in_ms_at_one_job_a_second_needs_more_workers(bimodal_csv):
    """Our bimodal file (mean 6.6 s): 4 workers carry 0.598 jobs/s, so 1 job/s is refused; the
    suggested pool takes it at 70% or a little less, and the advice then warns of nothing."""
    with pytest.raises(ConfigError) as caught:
        advise(bimodal_csv, column="duration_ms", unit="ms", arrival_rate=1, verify=False)
    assert str(caught.value).startswith(
        "workers: 4 workers carry 0.598 jobs/s (mean job 6.65 s), but the arrival rate is 1 "
        "jobs/s, 167% of that; 10 workers (--workers 10) would be 67% busy"
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error", LeaseWarning)
        sized = advise(
            bimodal_csv, column="duration_ms", unit="ms", arrival_rate=1, workers=10, verify=False
        )
    assert 0.6 < sized.utilisation <= 0.7 and "warning" not in str(sized)


def test_three_hundred_jobs_a_second_is_advised_on_the_pool_the_refusal_names():
    with pytest.raises(ConfigError) as caught:
        advise("sample", arrival_rate=300, verify=False)
    need = int(str(caught.value).split("(--workers ")[1].split(")")[0])
    advice = advise("sample", arrival_rate=300, workers=need, verify=False)
    assert 0.69 < advice.utilisation <= 0.70
    assert advice.false_expiries_per_day == pytest.approx(
        advice.predicted_false_expiry * 300 * 86_400
    )
    assert f"DB load at 300 jobs/s: {advice.heartbeat_load:,.0f} heartbeats/s" in str(advice)


@pytest.mark.parametrize("rate, warned", [(1.38, False), (1.5, True)])
def test_from_80_percent_the_advice_warns_with_the_utilisation(rate, warned):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", LeaseWarning)
        advice = advise("sample", arrival_rate=rate, verify=False)
    pool = advice.inputs["pool"]
    u = rate / pool.capacity
    assert advice.utilisation == pytest.approx(u) and (u >= 0.8) == warned
    line = (
        f"utilisation {u:.0%}: {rate:g} jobs/s against the {pool.capacity:.3g} jobs/s that 4 "
        "workers carry (mean job 2.24 s); above 80% a backlog builds quickly"
    )
    lines = str(advice).splitlines()
    assert any(m.startswith(line) for m in map(str, (w.message for w in caught))) == warned
    assert any(x.startswith(f"  warning: {line}") for x in lines) == warned
    assert f"  load: {rate:g} jobs/s (arrival_rate), {u:.0%} of the {pool.capacity:.3g} jobs/s" in (
        "\n".join(lines)
    )


def test_a_pool_of_one_reads_singular_and_a_huge_rate_names_its_size():
    one = Pool(1, Dist.constant(2.0), 0.0, 0.0, 5.0)
    assert one.describe() == "1 worker carries 0.5 jobs/s (mean job 2 s)"
    assert one.workers_for(100.0) == math.ceil(100 / (0.5 * 0.7))
    assert one.utilisation(0.25) == 0.5 and one.offered_load(0.25) == 0.5
    assert closed_forms.worked_at_crash_mean(Dist.constant(2.0)) == 1.0
