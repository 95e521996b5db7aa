"""How a notebook runs: fast (CI) or full mode and the sizes it picks, plotting defaults, sweep
executor and progress bars, whether a widget frontend is attached, and prose computed from numbers."""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace

import pandas as pd

from sim.errors import ConfigError
from sim.wording import duration

FAST_ENV = "LEASELAB_FAST"
HEADLESS_ENV = "LEASELAB_HEADLESS"
_TRUE = ("1", "true", "yes", "on")
_FALSE = ("", "0", "false", "no", "off")
# Processes that execute notebooks without a widget frontend (the kernel's parent).
HEADLESS_RUNNERS = ("nbconvert", "nbclient", "papermill", "pytest", "nbmake")


# ---- sizing: fast (CI) and full (publication) mode ------------------------------------------------


def _flag(name: str) -> bool | None:
    """An environment flag: True, False, or None when unset."""
    value = os.environ.get(name)
    if value is None:
        return None
    value = value.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ConfigError(f"${name}: expected 1 or 0 (true/false, yes/no, on/off), got {value!r}")


def fast_mode(override: bool | None = None) -> bool:
    """Fast mode (small horizons, few jobs and replications): `override` if given, else $LEASELAB_FAST."""
    if override is not None:
        return bool(override)
    return bool(_flag(FAST_ENV))


def size(full, fast, *, mode: bool | None = None):
    """`fast` in fast mode, else `full`. `mode` forces the mode (None: $LEASELAB_FAST)."""
    return fast if fast_mode(mode) else full


def sizes(mode: bool | None = None, **pairs) -> SimpleNamespace:
    """Several sizes at once: sizes(FAST, reps=(100, 8), jobs=(900, 150)).reps -> 100 or 8."""
    out = {}
    for name, pair in pairs.items():
        if not isinstance(pair, tuple) or len(pair) != 2:
            raise ConfigError(f"{name}: expected a (full, fast) pair, got {pair!r}")
        out[name] = size(*pair, mode=mode)
    return SimpleNamespace(**out)


def setup(fast: bool | None = None) -> bool:
    """Plotting and display defaults for a notebook; returns whether fast mode is on.

    Full mode draws at a higher resolution for sharing (make html); fast mode keeps CI light.
    """
    import matplotlib as mpl

    mode = fast_mode(fast)
    mpl.rcParams.update(
        {
            "figure.dpi": 72 if mode else 110,
            "savefig.dpi": 110 if mode else 160,
            "axes.titlesize": 10,
            "axes.spines.top": False,
            "axes.spines.right": False,
        }
    )
    pd.set_option("display.precision", 3)
    pd.set_option("display.max_columns", 30)
    pd.set_option("display.width", 160)
    return mode


def executor(fast: bool | None = None) -> str | None:
    """The `executor=` for sweeps: in-process ("serial") in fast mode, where runs are few and a
    process pool would cost more to start than it saves; None (all cores) in full mode."""
    return "serial" if fast_mode(fast) else None


def release_workers() -> None:
    """Stop the worker processes that full-mode sweeps started (they otherwise live until the
    kernel exits)."""
    from sim.sweep import shutdown_pools

    shutdown_pools()


def progress() -> bool | None:
    """The `progress=` for sweeps: automatic where a widget frontend shows bars, never headless."""
    return None if not headless() else False


# ---- prose computed from variables ----------------------------------------------------------------


def md(text: str):
    """Show `text` (Markdown, usually an f-string) as prose in a notebook; print it elsewhere."""
    from IPython import get_ipython
    from IPython.display import Markdown, display

    if get_ipython() is None:
        print(text)
        return None
    display(Markdown(text))
    return None


def claim(condition, text: str):
    """Show `text` as prose if `condition` holds, else fail loudly: a notebook's claims are checked
    every time it runs (CI included), so the narrative cannot drift from the numbers."""
    if not bool(condition):
        raise AssertionError(f"the notebook claims, but this run does not show: {text}")
    return md(text)


def seconds(x: float, digits: int = 3) -> str:
    """A duration in prose: '12.3 s', '10 min', '4 h'; 'never' when missing (NaN or inf: the event
    never happened)."""
    return duration(x, digits, none="never")


def _parent_cmdline() -> str:
    """The command line of the process that launched this kernel (Linux), or ''."""
    pid = os.environ.get("JPY_PARENT_PID")
    if not pid:
        return ""
    try:
        return (
            Path(f"/proc/{int(pid)}/cmdline")
            .read_bytes()
            .replace(b"\0", b" ")
            .decode("utf-8", "replace")
        )
    except (OSError, ValueError):
        return ""


def headless(override: bool | None = None) -> bool:
    """True when no widget frontend can show sliders: $LEASELAB_HEADLESS, no IPython kernel, or a
    kernel started by a batch runner (nbconvert, nbclient, papermill, pytest). `override` wins."""
    if override is not None:
        return bool(override)
    flag = _flag(HEADLESS_ENV)
    if flag is not None:
        return flag
    try:
        from IPython import get_ipython
    except ImportError:
        return True
    shell = get_ipython()
    if shell is None or not hasattr(shell, "kernel"):
        return True
    parent = _parent_cmdline().lower()
    return any(runner in parent for runner in HEADLESS_RUNNERS)


def widgets_available(headless_override: bool | None = None) -> bool:
    """Sliders can be shown: a widget frontend is (probably) attached and ipywidgets is installed."""
    if headless(headless_override):
        return False
    try:
        import ipywidgets  # noqa: F401
    except ImportError:
        return False
    return True
