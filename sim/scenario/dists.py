"""Probability distributions of durations, as scenario values and as fast seeded samplers."""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from sim.errors import ConfigError
from sim.scenario.limits import MAX_SECONDS

KINDS = ("constant", "exponential", "uniform", "lognormal", "pareto", "empirical")
PARAMETERS = {  # the fields each kind uses
    "constant": ("value",),
    "exponential": ("mean",),
    "uniform": ("low", "high"),
    "lognormal": ("median", "p99"),
    "pareto": ("scale", "alpha"),
    "empirical": ("samples",),
}
# scipy.stats.norm.ppf(0.99); scipy is imported only where needed (live processes start faster)
_Z99 = 2.3263478740408408
_BLOCK = 512
_FIRST_BLOCKS = (8, 16, 32, 64, 128, 256)  # then blocks of _BLOCK


@dataclass(frozen=True)
class Dist:
    """A duration distribution in seconds.

    constant(value); exponential(mean); uniform(low, high); lognormal(median, p99);
    pareto(scale, alpha) with minimum `scale` (heavy tail); empirical(samples) resampled uniformly.
    """

    kind: str = "constant"
    value: float = 0.0
    mean: float = 0.0
    low: float = 0.0
    high: float = 0.0
    median: float = 0.0
    p99: float = 0.0
    scale: float = 0.0
    alpha: float = 0.0
    samples: tuple[float, ...] = ()

    @classmethod
    def constant(cls, value: float) -> Dist:
        return cls("constant", value=float(value))

    @classmethod
    def exponential(cls, mean: float) -> Dist:
        return cls("exponential", mean=float(mean))

    @classmethod
    def uniform(cls, low: float, high: float) -> Dist:
        return cls("uniform", low=float(low), high=float(high))

    @classmethod
    def lognormal(cls, median: float, p99: float) -> Dist:
        return cls("lognormal", median=float(median), p99=float(p99))

    @classmethod
    def pareto(cls, scale: float, alpha: float) -> Dist:
        return cls("pareto", scale=float(scale), alpha=float(alpha))

    @classmethod
    def empirical(cls, samples: Iterable[float]) -> Dist:
        return cls("empirical", samples=tuple(float(s) for s in samples))

    def problems(self, field: str) -> list[str]:
        """Why this distribution is not usable, one line per problem (empty if fine)."""
        bad = []
        if self.kind not in KINDS:
            return [f"{field}.kind: {self.kind!r} is not one of {', '.join(KINDS)}"]
        for name in PARAMETERS[self.kind]:
            value = getattr(self, name)
            if name == "samples":
                continue
            if (
                isinstance(value, bool)
                or not isinstance(value, int | float)
                or not math.isfinite(value)
            ):
                return [f"{field}.{name}: must be a finite number, got {value!r}"]
            if name != "alpha" and value > MAX_SECONDS:
                return [
                    f"{field}.{name}: {value:g} s is too long: durations are at most "
                    f"{MAX_SECONDS:g} s"
                ]
        checks = {
            "constant": [("value", self.value >= 0, "must be >= 0")],
            "exponential": [("mean", self.mean > 0, "must be > 0")],
            "uniform": [("low", 0 <= self.low <= self.high, "needs 0 <= low <= high")],
            "lognormal": [
                ("median", self.median > 0, "must be > 0"),
                ("p99", self.p99 > self.median, "must be greater than median"),
            ],
            "pareto": [
                ("scale", self.scale > 0, "must be > 0"),
                ("alpha", self.alpha > 1, "must be > 1 (finite mean)"),
            ],
            "empirical": [
                ("samples", len(self.samples) > 0, "must not be empty"),
                (
                    "samples",
                    all(0 <= s <= MAX_SECONDS for s in self.samples),
                    f"must be finite and from 0 to {MAX_SECONDS:g} s",
                ),
            ],
        }[self.kind]
        for name, ok, message in checks:
            if not ok:
                bad.append(f"{field}.{name}: {message}")
        return bad

    @property
    def sigma(self) -> float:
        return math.log(self.p99 / self.median) / _Z99

    def mean_value(self) -> float:
        """The distribution's mean (used by analytic predictions)."""
        match self.kind:
            case "constant":
                return self.value
            case "exponential":
                return self.mean
            case "uniform":
                return (self.low + self.high) / 2
            case "lognormal":
                return self.median * math.exp(self.sigma**2 / 2)
            case "pareto":
                return self.scale * self.alpha / (self.alpha - 1)
            case _:
                return float(np.mean(self.samples))

    def quantile(self, q: float) -> float:
        """The q-quantile (0 < q < 1)."""
        match self.kind:
            case "constant":
                return self.value
            case "exponential":
                from scipy import stats

                return float(stats.expon.ppf(q, scale=self.mean))
            case "uniform":
                return self.low + q * (self.high - self.low)
            case "lognormal":  # scipy.stats' numbers, without importing it (a second or more)
                from sim.support.scipy_steps import lognormal_ppf

                return float(lognormal_ppf(q, self.sigma, self.median))
            case "pareto":
                from scipy import stats

                return float(stats.pareto.ppf(q, self.alpha, scale=self.scale))
            case _:
                return float(np.quantile(self.samples, q))

    def sampler(self, rng: np.random.Generator) -> Callable[[], float]:
        """One draw per call, from blocks of up to 512 (one numpy call each): on the simulation's
        hot path a draw costs a C-level next()."""
        if self.kind == "constant":
            return itertools.repeat(self.value).__next__
        return blocks(_block_draw(self, rng)).__next__

    def to_dict(self) -> dict[str, Any]:
        keys = PARAMETERS[self.kind]
        out: dict[str, object] = {"kind": self.kind}
        for key in keys:
            value = getattr(self, key)
            out[key] = list(value) if key == "samples" else value
        return out


def blocks(draw: Callable[..., np.ndarray], *args: Any) -> Iterator[Any]:
    """The values of `draw(*args, size)` called again and again: one numpy call per block, the
    blocks growing from 8 values to _BLOCK (a short run, sim hunt's, draws a few values of a
    stream, not 512), the same sequence as drawing them one at a time from that generator. A
    chain of the blocks' lists: a draw is a C-level next(), no generator frame to resume."""
    sizes = itertools.chain(_FIRST_BLOCKS, itertools.repeat(_BLOCK))
    calls = map(functools.partial(draw, *args), sizes)
    return itertools.chain.from_iterable(map(np.ndarray.tolist, calls))


def _block_draw(dist: Dist, rng: np.random.Generator) -> Callable[[int], np.ndarray]:
    """A function of `size` that draws that many values of `dist` from `rng`."""
    match dist.kind:
        case "exponential":
            return lambda size: rng.exponential(dist.mean, size)
        case "uniform":
            return lambda size: rng.uniform(dist.low, dist.high, size)
        case "lognormal":
            mu = math.log(dist.median)
            return lambda size: rng.lognormal(mu, dist.sigma, size)
        case "pareto":
            return lambda size: dist.scale * (1.0 + rng.pareto(dist.alpha, size))
        case "empirical":
            samples = np.asarray(dist.samples)
            return lambda size: samples[rng.integers(0, len(samples), size)]
    raise ConfigError(f"unknown distribution kind {dist.kind!r}")


def decode_utf8(raw: bytes, path: str | Path, what: str) -> str:
    """The text of a file that must be UTF-8 (a leading byte-order mark is dropped);
    ConfigError if not."""
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise ConfigError(
            f"{path}:{line}: not UTF-8 text (byte 0x{raw[exc.start]:02x}); "
            f"save the {what} file as UTF-8"
        ) from None
