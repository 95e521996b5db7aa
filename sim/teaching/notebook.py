"""How a notebook runs: fast (CI) or full mode and the sizes it picks, plotting defaults, sweep
executor and progress bars, whether a widget frontend is attached, and prose computed from
numbers."""

from __future__ import annotations

from types import SimpleNamespace

import pandas as pd

from sim.errors import ConfigError
from sim.support.in_words import claim as checked
from sim.support.in_words import duration
from sim.support.progress import HEADLESS_ENV, HEADLESS_RUNNERS, env_flag, headless  # noqa: F401

FAST_ENV = "LEASELAB_FAST"


# ---- sizing: fast (CI) and full (publication) mode -----------------------------------------------


def fast_mode(override: bool | None = None) -> bool:
    """Fast mode (small horizons, few jobs and replications): `override` if given,
    else $LEASELAB_FAST."""
    if override is not None:
        return bool(override)
    return bool(env_flag(FAST_ENV))


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
    _show_figures_as_images()
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


def _show_figures_as_images() -> None:
    """A Figure a cell returns (review.figure(), say) shows as an image, not as its repr
    `<Figure size ... with 2 Axes>`: matplotlib's inline backend teaches IPython to draw figures
    only once its module is loaded, which pyplot does at the first pyplot figure. Load it now
    when it is the backend (another backend, `%matplotlib widget` say, is left alone)."""
    from sim.support.progress import in_kernel

    if not in_kernel():
        return
    import matplotlib

    if "inline" not in matplotlib.get_backend().lower():
        return
    from IPython import get_ipython
    from matplotlib_inline import backend_inline  # its first import registers the formatters

    if getattr(backend_inline.configure_inline_support, "current_backend", None) != "inline":
        backend_inline.configure_inline_support(get_ipython(), "inline")


def executor(fast: bool | None = None) -> str | None:
    """The `executor=` for sweeps: in-process ("serial") in fast mode, where runs are few and a
    process pool would cost more to start than it saves; None (all cores) in full mode."""
    return "serial" if fast_mode(fast) else None


def release_workers() -> None:
    """Stop the worker processes that full-mode sweeps started (they otherwise live until the
    kernel exits)."""
    from sim.sweeps import shutdown_pools

    shutdown_pools()


def progress() -> bool | None:
    """The `progress=` for sweeps: automatic where a widget frontend shows bars, never headless."""
    return None if not headless() else False


# ---- prose computed from variables ---------------------------------------------------------------


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
    """Show `text` as prose if `condition` holds, else fail loudly (sim.support.in_words.claim,
    which the advice's sentences use too): a notebook's claims are checked every time it runs (CI
    included), so the narrative cannot drift from the numbers."""
    return md(checked(condition, text, who="the notebook claims, but this run does not show"))


def seconds(x: float, digits: int = 3) -> str:
    """A duration in prose: '12.3 s', '10 min', '4 h'; 'never' when missing (NaN or inf: the event
    never happened)."""
    return duration(x, digits, none="never")


def widgets_available(headless_override: bool | None = None) -> bool:
    """Sliders can be shown: a widget frontend is (probably) attached and ipywidgets
    is installed."""
    if headless(headless_override):
        return False
    try:
        import ipywidgets  # noqa: F401
    except ImportError:
        return False
    return True


def server_words(dsn: str) -> str:
    """Where a notebook's PostgreSQL is, as a shared page may say it: host, port, database and
    user (describe_dsn: never a password), a Unix-socket folder (a local path, such as the
    embedded server's cache folder) said as '(a local socket)'."""
    from psycopg.conninfo import conninfo_to_dict

    from sim.db.server import describe_dsn

    text = describe_dsn(dsn)
    try:
        hosts = str(conninfo_to_dict(dsn).get("host") or "").split(",")
    except Exception:  # a DSN libpq cannot read: describe_dsn has said so without a secret
        return text
    for host in hosts:
        if host.startswith("/"):
            text = text.replace(host, "(a local socket)")
    return text
