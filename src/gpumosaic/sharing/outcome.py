"""What one shared GPU did to its jobs: completion times and the costs of sharing."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class JobOutcome:
    """Per-job result. Times are seconds of wall clock spent in each state.

    ``lock_wait_s``: in a GPU phase but not allowed on the GPU (another job holds the lock);
    ``refill_s``: stalled while its working set is faulted back in (and hand-over sync);
    ``thrash_s``: computing while the running jobs' working sets overflow GPU memory.
    """

    name: str
    arrival_s: float
    finish_s: float
    solo_s: float
    lock_wait_s: float
    refill_s: float
    thrash_s: float
    handovers_in: int

    @property
    def run_s(self) -> float:
        return self.finish_s - self.arrival_s

    @property
    def slowdown(self) -> float:
        """Run time shared over run time alone (1.0 = no cost from sharing)."""
        return self.run_s / self.solo_s if self.solo_s > 0 else 1.0


@dataclass(frozen=True, slots=True)
class SharingOutcome:
    """One GPU's run: per-job outcomes plus GPU-level metrics."""

    jobs: tuple[JobOutcome, ...]
    handovers: int
    memory_pressure: float  # summed working sets / GPU memory; > 1 means oversubscribed

    @property
    def makespan_s(self) -> float:
        return max((j.finish_s for j in self.jobs), default=0.0)

    @property
    def thrash_s(self) -> float:
        return sum(j.thrash_s for j in self.jobs)

    @property
    def lock_wait_s(self) -> float:
        return sum(j.lock_wait_s for j in self.jobs)

    def job(self, name: str) -> JobOutcome:
        for j in self.jobs:
            if j.name == name:
                return j
        raise KeyError(name)
