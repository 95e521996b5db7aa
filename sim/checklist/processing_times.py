"""How long the jobs' work takes, as the runs show it: finished attempts are observations, and
attempts cut off before the work ended (a deadline, a crash, a lost lease, the horizon) are
right-censored ones: the work took at least that long. A Kaplan-Meier estimate
(scipy.stats.ecdf on scipy.stats.CensoredData) uses both, so a quantile or a share never rests on
the completions alone, which a deadline or a TTL censors: the jobs it cuts off are the long ones.

    times = processing_times(runs)
    times.quantile(0.999)        # None when the estimate never gets there (a censored tail)
    times.share_longer(ttl)      # the share of jobs whose work outlasts ttl
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np
from scipy import stats

from sim.support.in_words import count, duration

# records that end a handler's work: its completion (refused or not), a rejected payload, or its
# result dropped past the worker-side deadline; each names its lease by worker, job and attempt
FINISH_KINDS = ("complete", "complete_rejected", "payload_conflict", "late_result")


@dataclass(frozen=True)
class ProcessingTimes:
    """Per job: the time its work took (finished) or ran before being cut off (not finished)."""

    times: np.ndarray
    finished: np.ndarray  # bool, per job

    def __len__(self) -> int:
        return len(self.times)

    @property
    def n_finished(self) -> int:
        return int(self.finished.sum())

    @property
    def n_cut(self) -> int:
        return len(self) - self.n_finished

    @property
    def longest(self) -> float:
        """The longest work seen, finished or cut off (a lower bound on the longest job)."""
        return float(self.times.max()) if len(self) else np.nan

    @cached_property
    def _sf(self):
        data = stats.CensoredData(
            uncensored=self.times[self.finished], right=self.times[~self.finished]
        )
        return stats.ecdf(data).sf

    def quantile(self, q: float) -> float | None:
        """The q-quantile of the work's duration; None when the estimate never reaches q (more
        than 1 - q of the jobs were cut off before any finished after them). With nothing cut
        off the estimate is the empirical distribution, interpolated as numpy's quantile."""
        if not self.n_finished:
            return None
        if not self.n_cut:
            return float(np.quantile(self.times, q))
        sf = self._sf
        reached = np.flatnonzero(sf.probabilities <= 1 - q + 1e-12)
        return float(sf.quantiles[reached[0]]) if len(reached) else None

    def share_longer(self, seconds: float) -> float:
        """The estimated share of jobs whose work outlasts `seconds` (Kaplan-Meier: a job cut off
        at or after `seconds` counts as outlasting it)."""
        if not len(self):
            return np.nan
        if not self.n_cut:
            return float((self.times > seconds).mean())
        return float(self._sf.evaluate(np.array([seconds]))[0])

    def basis(self) -> str:
        """'47 jobs: 40 finished, 7 cut off after up to 30 s'."""
        cut = self.times[~self.finished]
        tail = f", {self.n_cut} cut off after up to {duration(cut.max())}" if len(cut) else ""
        return f"{count(len(self), 'job')}: {self.n_finished} finished{tail}"


def processing_times(runs) -> ProcessingTimes:
    """Per job of each run: the work its first finished attempt took (claim -> the handler's
    completion, refused or not, or its result dropped past the deadline); for a job none of
    whose attempts finished, the longest any of them ran before it was cut off (every attempt
    does the same work)."""
    times: list[float] = []
    finished: list[bool] = []
    for r in runs:
        ends = _finish_times(r)
        by_job: dict[int, tuple[bool, float]] = {}
        for lease in r.leases.itertuples():
            key = (lease.worker, int(lease.job), int(lease.attempt))
            done = ends.get(key)
            if done is not None:
                seen = (True, done - lease.start)
            else:
                end = lease.released_at if np.isfinite(lease.released_at) else r.scenario.horizon
                seen = (False, end - lease.start)
            before = by_job.get(key[1])
            if before is None or (not before[0] and (seen[0] or seen[1] > before[1])):
                by_job[key[1]] = seen
        for ok, took in by_job.values():
            finished.append(ok)
            times.append(max(float(took), 0.0))
    return ProcessingTimes(np.asarray(times, dtype=float), np.asarray(finished, dtype=bool))


def _finish_times(run) -> dict[tuple[str, int, int], float]:
    """(worker, job, attempt) -> when that attempt's handler finished its work (first record)."""
    events = run.events
    done = events[events["kind"].isin(FINISH_KINDS) & events["attempt"].notna()]
    out: dict[tuple[str, int, int], float] = {}
    for t, worker, job, attempt in zip(
        done["t"], done["worker"], done["job"], done["attempt"], strict=True
    ):
        out.setdefault((worker, int(job), int(attempt)), float(t))
    return out
