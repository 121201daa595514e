"""What each job did in a round of the live service: how long it stepped, the steps it
reported, and its measured steps/s per GPU model (Gavel's EMA of the rate each lease
measured, which replaces the prior from the next solve on). The driver tells the meter
when leases start and end and asks it, at each boundary, for the round's report.

The time a round credits a job (what the policy counts as received, and the attained
service) is the time its process spent stepping in the round, as its lease reports it
(``Lease.stepping_s``): Gavel credits the execution time its workers report, and the
simulator credits steps / rate. Not the span it held its GPUs: that includes the wait
parked for the round's decision, which the simulator has no counterpart of (measured
on Gavel's 16-job workload at rounds of 3,600 s: 5 s more per round, 0.15 %).

A member of a packed pair measures the pair's rate, not its own: its samples are kept
per (job, GPU type, partner), apart from its isolated estimate, and come back marked
with the partner (the decider's pair rates, never its isolated ones).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from gpumosaic.mechanisms.rounds.decision import RoundReport
from gpumosaic.model.gpu import MILLI_PER_GPU
from gpumosaic.model.plan import PlannedEntity
from gpumosaic.runtime.leases import LiveLease

RATE_EMA_ALPHA = 0.5  # Gavel's throughput EMA


@dataclass(slots=True)
class _Held:
    """When a job held its GPUs in the current round (its finish time, and the live view
    of its attained service): from the later of the round's (or its launch's) start and
    its process's first call to the lease API, to its exit or the round's end."""

    start: float
    lease_id: str
    launched: bool = True  # a new process (False: an extended lease)
    end: float | None = None
    partner: int | None = None  # the job it is packed with (None: alone)
    contacted_at: float | None = None  # kept when the lease ends
    finished_at: float | None = None  # when it reported its last step (kept at its end)
    stepping_s: float | None = None  # the lease's reported stepping time, at its end


@dataclass(frozen=True, slots=True)
class RateSample:
    """A job's estimated steps/s on a GPU type after folding in one measurement."""

    job_id: int
    gpu_type: str
    type_index: int
    rate: float
    samples: int
    partner: int | None = None  # measured packed with this job (a pair rate)


@dataclass(frozen=True, slots=True)
class ClosedRound:
    report: RoundReport
    attained: list[tuple[float, int]]  # (GPU seconds, job id) of each job that held GPUs
    rates: list[RateSample]
    # Per new lease of the round: from the round's start to the process's first call of
    # the lease API (launch latency, including the wait for the job's previous process).
    launch_latency_s: list[float]


class RoundMeter:
    def __init__(self, type_index: Mapping[str, int]) -> None:
        self.type_index = type_index
        self._credited: dict[int, float] = {}  # job -> steps the decider was told of
        self._held: dict[int, _Held] = {}
        # job -> (steps, iter_s, steps at launch, type, partner) of its lease that ended
        # this round
        self._last_lease: dict[int, tuple[float, float, float, str, int | None]] = {}
        # (job, type, partner or None) -> (rate, samples)
        self._estimates: dict[tuple[int, str, int | None], tuple[float, int]] = {}
        # job -> (type, partner or None) with a measured rate
        self._measured: dict[int, set[tuple[int, int | None]]] = {}
        self._round_start: float | None = None
        # lease -> its stepping time already credited to earlier rounds (extended leases)
        self._stepping_credited: dict[str, float] = {}

    def admit(self, job_id: int, samples: Mapping[str, tuple[float, int]]) -> dict[int, float]:
        """A job the decider takes (again) and the rates measured for it before (from
        the store); returns the measured rate per known type index."""
        rates: dict[int, float] = {}
        for name, (rate, count) in samples.items():
            self._estimates[(job_id, name, None)] = (rate, count)
            t = self.type_index.get(name)
            if t is not None:
                rates[t] = rate
                self._measured.setdefault(job_id, set()).add((t, None))
        return rates

    def start_progress(self, job_id: int, steps_done: float) -> None:
        self._credited[job_id] = steps_done

    def is_measured(self, job_id: int, type_index: int, partner: int | None = None) -> bool:
        """Whether the job's rate on the type (packed with ``partner``) was measured."""
        return (type_index, partner) in self._measured.get(job_id, ())

    def lease_started(
        self,
        job_id: int,
        lease_id: str,
        now: float,
        *,
        launched: bool = True,
        partner: int | None = None,
    ) -> None:
        """The job holds GPUs from ``now`` on (a new lease, or one extended), packed with
        ``partner`` or alone."""
        self._held[job_id] = _Held(now, lease_id, launched, partner=partner)

    def lease_ended(self, job_id: int, lease_id: str, lease: LiveLease | None, now: float) -> None:
        held = self._held.get(job_id)
        mine = held is not None and held.lease_id == lease_id
        if held is not None and held.end is None and mine:
            held.end = now
            held.contacted_at = lease.contacted_at if lease is not None else None
            held.finished_at = lease.finished_at if lease is not None else None
            held.stepping_s = lease.iter_s if lease is not None else None
        if lease is not None:
            self._last_lease[job_id] = (
                lease.steps,
                lease.iter_s,
                lease.steps_at_launch,
                lease.gpu_type,
                held.partner if held is not None and mine else None,
            )

    def held_gpu_s(
        self,
        job_id: int,
        now: float,
        lease_by_id: Callable[[str], LiveLease | None],
        demand_milli: int,
    ) -> float:
        """GPU seconds the job has held in the current round so far, which the store
        credits only when the round closes (so a running job's attained time grows live)."""
        held = self._held.get(job_id)  # one dict read: safe from the API's threads
        if held is None:
            return 0.0
        start, end = self._ran(held, now, lease_by_id)
        return max(end - start, 0.0) * demand_milli / MILLI_PER_GPU

    def close(
        self,
        entries: Sequence[PlannedEntity],
        now: float,
        epoch: float,
        *,
        steps_now: Callable[[int], float],
        live_lease: Callable[[int], tuple[bool, LiveLease | None]],
        lease_by_id: Callable[[str], LiveLease | None],
        demand_milli: Callable[[int], int],
    ) -> ClosedRound:
        """The round whose plan has ``entries`` ends at ``now`` (wall clock; ``epoch``
        is the decider's time 0): each entry's steps since the decider last heard, how
        long it ran, when it finished, and the rates its leases measured.
        ``live_lease(job)``: whether the job has a lease that runs and is not stopping,
        and that lease."""
        n = len(entries)
        ran = np.zeros(n)
        steps_a, steps_b = np.zeros(n), np.zeros(n)
        finish_a, finish_b = np.full(n, now), np.full(n, now)
        attained: list[tuple[float, int]] = []
        rates: list[RateSample] = []
        latency: list[float] = []
        round_start = self._round_start if self._round_start is not None else now
        for i, entry in enumerate(entries):
            # A pair ran as long as its longer-stepping member (Gavel: the larger of the
            # two execution times; the simulator: until its last member stopped).
            stepped = 0.0
            for k, job_id in enumerate(entry.job_ids):
                steps = steps_now(job_id)
                delta = steps - self._credited.get(job_id, 0.0)
                self._credited[job_id] = steps
                held = self._held.get(job_id)
                _, end = self._ran(held, now, lease_by_id)
                contacted = self._contacted(held, lease_by_id)
                if held is not None and held.launched and contacted is not None:
                    latency.append(max(contacted - round_start, 0.0))
                if k == 0:
                    steps_a[i], finish_a[i] = delta, end
                else:
                    steps_b[i], finish_b[i] = delta, end
                if held is not None:
                    job_stepped = self._stepped(held, lease_by_id)
                    stepped = max(stepped, job_stepped)
                    attained.append((job_stepped * demand_milli(job_id) / MILLI_PER_GPU, job_id))
                partner = entry.job_ids[1 - k] if len(entry.job_ids) == 2 else None
                sample = self._observe_rate(job_id, entry.gpu_type, partner, *live_lease(job_id))
                if sample is not None:
                    rates.append(sample)
            ran[i] = stepped
        for lease_id in [h.lease_id for h in self._held.values() if h.end is not None]:
            self._stepping_credited.pop(lease_id, None)
        self._held.clear()
        self._round_start = None
        report = RoundReport(now - epoch, ran, steps_a, steps_b, finish_a - epoch, finish_b - epoch)
        return ClosedRound(report, attained, rates, latency)

    def round_started(self, now: float) -> None:
        self._round_start = now

    def _stepped(self, held: _Held, lease_by_id: Callable[[str], LiveLease | None]) -> float:
        """Seconds (job time) the job's lease stepped in this round, as it reported them:
        its stepping time now (or at its end) less what earlier rounds were credited."""
        if held.end is not None:
            total = held.stepping_s or 0.0
        else:
            lease = lease_by_id(held.lease_id)
            total = lease.iter_s if lease is not None else 0.0
        before = self._stepping_credited.get(held.lease_id, 0.0)
        self._stepping_credited[held.lease_id] = max(total, before)
        return max(total - before, 0.0)

    @staticmethod
    def _contacted(
        held: _Held | None, lease_by_id: Callable[[str], LiveLease | None]
    ) -> float | None:
        if held is None:
            return None
        if held.end is not None:
            return held.contacted_at
        lease = lease_by_id(held.lease_id)
        return lease.contacted_at if lease is not None else None

    @staticmethod
    def _ran(
        held: _Held | None, now: float, lease_by_id: Callable[[str], LiveLease | None]
    ) -> tuple[float, float]:
        """(start, end) of the job's running time this round (start == end: none)."""
        if held is None:
            return now, now
        end = held.end if held.end is not None else now
        contacted, finished = held.contacted_at, held.finished_at
        if held.end is None:
            lease = lease_by_id(held.lease_id)
            contacted = lease.contacted_at if lease is not None else None
            finished = lease.finished_at if lease is not None else None
        if finished is not None:  # its last step, not when its exit was noticed
            end = min(end, finished)
        if contacted is None:
            return end, end
        return min(max(held.start, contacted), end), end

    def _observe_rate(
        self,
        job_id: int,
        gpu_type: str,
        partner: int | None,
        running: bool,
        lease: LiveLease | None,
    ) -> RateSample | None:
        """Rate of the job's current (or just ended) lease on ``gpu_type``, packed with
        ``partner`` (the plan's) or alone; none when the lease ran otherwise."""
        if running:
            if lease is None:
                return None
            held = self._held.get(job_id)
            steps, iter_s, base, lease_type, lease_partner = (
                lease.steps,
                lease.iter_s,
                lease.steps_at_launch,
                lease.gpu_type,
                held.partner if held is not None and held.lease_id == lease.lease_id else None,
            )
        else:
            last = self._last_lease.pop(job_id, None)
            if last is None:
                return None
            steps, iter_s, base, lease_type, lease_partner = last
        if lease_type != gpu_type or lease_partner != partner or iter_s <= 0 or steps - base < 1:
            return None
        measured = (steps - base) / iter_s
        key = (job_id, gpu_type, partner)
        old = self._estimates.get(key)
        if old is None:
            rate, samples = measured, 1
        else:
            rate, samples = RATE_EMA_ALPHA * measured + (1 - RATE_EMA_ALPHA) * old[0], old[1] + 1
        self._estimates[key] = (rate, samples)
        t = self.type_index[gpu_type]
        self._measured.setdefault(job_id, set()).add((t, partner))
        return RateSample(job_id, gpu_type, t, rate, samples, partner)
