"""`advise` answers at once (issue 37): the command line prints the answer before the verification
simulations run; the text answer imports neither scipy.stats, scipy.signal, matplotlib nor simpy
(their stand-ins give scipy's numbers exactly); one prediction model per advice; and its argument
rules are one table that advise() and the command line both read (issue 32)."""

from __future__ import annotations

import json
import os
import signal as signals
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from scipy import signal, stats

import sim
from sim.advice import advisor
from sim.advice.options import NUMBERS
from sim.cli.main import main
from sim.errors import ConfigError
from sim.support import scipy_steps
from sim.theory import closed_forms

SLOW = ("scipy.stats", "scipy.signal", "matplotlib", "simpy")


def test_the_text_answer_imports_none_of_the_slow_libraries():
    argv = ["advise", "sample", "--arrival-rate", "1", "--no-verify", "--as", "river"]
    code = (
        "import contextlib, io, json, sys\n"
        "from sim.cli.main import main\n"
        "with contextlib.redirect_stdout(io.StringIO()) as out:\n"
        f"    code = main({argv!r})\n"
        f"print(json.dumps([code, out.getvalue()[:3], [m for m in sys.modules if m in {SLOW!r}]]))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(done.stdout.splitlines()[-1]) == [0, "A: ", []]


def test_the_answer_is_on_screen_before_the_simulations_run(monkeypatch, capsys):
    seen = {}

    def verify(self, **kwargs):
        seen["printed"] = capsys.readouterr().out
        seen["kwargs"] = kwargs
        return self

    monkeypatch.setattr(advisor.Advice, "verify", verify)
    assert main(["advise", "sample", "--arrival-rate", "1", "--replications", "2"]) == 0
    quiet = sim.advise("sample", arrival_rate=1, verify=False)
    assert seen["printed"] == quiet.text() + "\n"
    assert seen["kwargs"] == {"replications": 2, "seed": 0}


@pytest.mark.slow  # an advise in a subprocess, stopped during its simulations
def test_sigterm_during_the_verification_ends_advise_at_once(tmp_path):
    """Jobs of about 25 minutes: the answer comes in seconds, and its verification simulates them
    for about four minutes. SIGTERM, sent to the main process only (as a supervisor does), ends it
    with 143 within seconds: the pool's workers are killed, not waited for."""
    seconds = np.random.default_rng(5).lognormal(np.log(1500.0), 0.5, 500)
    durations = tmp_path / "durations.csv"
    durations.write_text("seconds\n" + "".join(f"{s:.3f}\n" for s in seconds))
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    argv = [sys.executable, "-m", "sim", "advise", str(durations)]
    advise = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )
    assert advise.stdout is not None
    while not advise.stdout.readline().startswith("A: "):  # the answer, then the simulations
        assert advise.poll() is None, advise.stderr.read() if advise.stderr else ""
    time.sleep(2.0)  # the pool's first runs are under way
    advise.send_signal(signals.SIGTERM)
    try:
        advise.communicate(timeout=60)
    finally:
        advise.kill()
    assert advise.returncode == 143


def test_stand_ins_give_scipy_stats_numbers_exactly():
    rng = np.random.default_rng(7)
    for _ in range(200):
        sigma, median = rng.uniform(0.05, 3.0), 10 ** rng.uniform(-3, 3)
        x = np.concatenate([10 ** rng.uniform(-5, 5, 50), [0.0, -1.0, np.inf, median]])
        assert np.array_equal(
            scipy_steps.lognormal_cdf(x, sigma, median), stats.lognorm.cdf(x, sigma, scale=median)
        )
        q = rng.uniform(0, 1, 50)
        assert np.array_equal(
            scipy_steps.lognormal_ppf(q, sigma, median), stats.lognorm.ppf(q, sigma, scale=median)
        )
        mu = 10 ** rng.uniform(-4, 2)
        assert scipy_steps.poisson_ppf(1 - 1e-12, mu) == stats.poisson.ppf(1 - 1e-12, mu)
        k, rates = np.arange(30)[:, None], np.append(0.0, rng.uniform(0, mu, 20))[None, :]
        assert np.array_equal(scipy_steps.poisson_pmf(k, rates), stats.poisson.pmf(k, rates))
        n = int(rng.integers(1, 50_000))
        shape = (int(rng.integers(0, n)) + 1, n - int(rng.integers(0, n)))
        assert scipy_steps.beta_ppf(0.95, *shape) == stats.beta.ppf(0.95, *shape)
        a, b = rng.random(int(rng.integers(2, 5000))), rng.random(4097)
        assert np.array_equal(scipy_steps.convolve(a, b), signal.fftconvolve(a, b))


def test_one_advice_builds_its_crash_wait_once(monkeypatch):
    built = []
    build = closed_forms.CrashPollWait.build.__func__

    def counted(cls, **kwargs):
        built.append(kwargs["offered_load"])
        return build(cls, **kwargs)

    monkeypatch.setattr(closed_forms.CrashPollWait, "build", classmethod(counted))
    advice = sim.advise("sample", arrival_rate=1, verify=False)
    advice.text()
    from sim.advice.queue_terms import in_queue_terms

    str(in_queue_terms(advice, "river"))
    # the search (widened once), the named settings, the shortest timeout without renewal
    assert len(built) == 1


@pytest.mark.parametrize("rule", [r for r in NUMBERS if r.keyword and r.flag], ids=str)
def test_each_rule_refuses_the_same_value_at_both_doors(capsys, rule):
    bad = -1.0 if rule.zero_ok else 0.0
    with pytest.raises(ConfigError, match=f"^{rule.keyword}: must be a "):
        sim.advise([1.0, 2.0], verify=False, **{rule.keyword: bad})
    assert main(["advise", "sample", "--no-verify", rule.flag, f"{bad:g}"]) == 2
    assert capsys.readouterr().err.startswith(f"error: {rule.flag} {bad:g}: must be ")
    if rule.most is not None:
        over = rule.most * 2
        with pytest.raises(ConfigError, match=f"^{rule.keyword}: must be at most "):
            sim.advise([1.0, 2.0], verify=False, **{rule.keyword: over})
        assert main(["advise", "sample", "--no-verify", rule.flag, f"{over:g}"]) == 2
        assert f"error: {rule.flag} {over:g}: must be " in capsys.readouterr().err
