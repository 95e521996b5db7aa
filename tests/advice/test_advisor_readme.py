"""The README's advisor examples run as written: on the bundled sample (or the CSV the README says
how to write), at an arrival rate the sample's pool can carry."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

import sim
from sim.cli.main import main

README = Path(__file__).resolve().parents[2] / "README.md"


def _commands(prefix: str) -> list[str]:
    return [
        line.strip() for line in README.read_text("utf-8").splitlines() if line.startswith(prefix)
    ]


@pytest.mark.slow  # README's advise commands in subprocesses: make test only
def test_the_readme_commands_run_on_the_sample_at_a_rate_the_pool_carries(
    tmp_path, monkeypatch, capsys
):
    monkeypatch.chdir(tmp_path)
    (write,) = _commands('python -c "import sim.advice.advisor')  # how to get the sample as a CSV
    code = shlex.split(write, comments=True)[2]
    subprocess.run([sys.executable, "-c", code], check=True, cwd=tmp_path)
    assert (
        tmp_path / "durations.csv"
    ).read_text() == sim.advice.advisor.sample_durations_path().read_text()
    # a GC log's pauses in ms, as the README's --pauses command reads them
    pauses = "\n".join(["pause_ms", *(str(5 + (i * 37) % 90) for i in range(300))])
    (tmp_path / "gc-pauses.csv").write_text(pauses + "\n", encoding="utf-8")
    commands = _commands("python -m sim advise ")
    assert len(commands) >= 3 and all("--arrival-rate" in c for c in commands)
    for command in commands:
        argv = shlex.split(command, comments=True)[3:]
        assert main([*argv, "--no-verify"]) == 0, capsys.readouterr().err
        out = capsys.readouterr().out
        rate = float(argv[argv.index("--arrival-rate") + 1])
        busy = re.search(r"load: [\d.]+ jobs/s \(arrival_rate\), (\d+)% of", out)
        assert busy and int(busy.group(1)) < 80 and "warning" not in out, (command, rate)
    assert (tmp_path / "advice.html").exists()


def test_the_readme_python_example_runs_on_the_sample():
    text = README.read_text("utf-8")
    call = re.search(r"advice = sim\.advise\((.*?)\n\)", text, re.S)
    assert call and '"sample"' in call.group(1)
    scope = {"sim": sim}
    exec("advice = sim.advise(" + call.group(1) + "\n    verify=False,\n)", scope)  # noqa: S102
    advice = scope["advice"]
    assert advice.inputs["arrival_rate"] == 1 and advice.utilisation == pytest.approx(
        0.56, abs=0.01
    )
    assert "56% of what the 4 default workers carry (1.78 jobs/s of the sample)" in call.group(1)
    assert f"{advice.inputs['pool'].capacity:.3g}" == "1.78"
