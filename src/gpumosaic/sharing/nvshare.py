"""nvshare's time-sharing of one GPU, simulated over time.

Mechanism (grgalex/nvshare, scheduler.c and client.c):

* every allocation is CUDA managed memory, so each process may use the whole GPU memory
  and evicted pages come back through page faults (``paging.PagingModel``);
* **anti-thrashing on**: a scheduler grants a GPU lock first-come-first-served; the holder
  keeps it for a time quantum ``tq_s``, then synchronizes and hands over if anyone waits
  (a holder nobody waits for is simply re-granted). A holder that submits no GPU work for
  ``idle_release_s`` (5 s, the client's early-release check interval) releases early. The
  new holder first faults back the part of its working set the others evicted (a refill)
  and pays a fixed hand-over sync cost;
* **anti-thrashing off**: every job in a GPU phase runs at once. If their working sets fit,
  they share the GPU's compute (a GPU phase keeps the GPU busy ``gpu_busy`` of the time,
  so two phases together run faster than back to back); if not, they thrash.

The simulation is a next-event loop with piecewise-constant rates: between two events
(a phase ends, a refill ends, a quantum expires, an idle holder releases, a job arrives)
every job progresses linearly, so the result is exact for the model and deterministic.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from gpumosaic.sharing.interference import GPU_PHASE_BUSY
from gpumosaic.sharing.jobs import Phase, SharedJob
from gpumosaic.sharing.lock import (
    HANDOVER_SYNC_S,
    AntiThrashing,
    Decision,
    GpuLock,
    Grant,
    Revoke,
    Schedule,
    check_tq,
)
from gpumosaic.sharing.outcome import JobOutcome, SharingOutcome
from gpumosaic.sharing.paging import PagingModel

# nvshare's client releases the lock after this long without GPU work (client.c).
NVSHARE_IDLE_RELEASE_S = 5.0
_MAX_EVENTS = 10_000_000
_BYTES_PER_MIB = 2**20


def _bytes(mib: float) -> int:
    return round(mib * _BYTES_PER_MIB)


@dataclass(frozen=True, slots=True)
class NvshareModel:
    """Parameters of nvshare on one GPU; ``simulate`` runs jobs on it."""

    tq_s: float = 30.0
    # on / off / auto (serialize only while the working sets overflow); True / False (kept
    # as given) mean on / off. ``mode`` is the value as an AntiThrashing.
    anti_thrashing: AntiThrashing | bool = True
    paging: PagingModel = field(default_factory=PagingModel)
    handover_s: float = HANDOVER_SYNC_S
    idle_release_s: float = NVSHARE_IDLE_RELEASE_S
    gpu_busy: float = GPU_PHASE_BUSY

    def __post_init__(self) -> None:
        check_tq(self.tq_s)
        if not isinstance(self.anti_thrashing, bool):
            object.__setattr__(self, "anti_thrashing", AntiThrashing(self.anti_thrashing))
        if self.handover_s < 0 or self.idle_release_s < 0:
            raise ValueError("handover_s and idle_release_s must be >= 0")
        if not 0.0 < self.gpu_busy <= 1.0:
            raise ValueError("gpu_busy must be in (0, 1]")

    @property
    def mode(self) -> AntiThrashing:
        mode = self.anti_thrashing
        if isinstance(mode, bool):
            return AntiThrashing.ON if mode else AntiThrashing.OFF
        return mode

    def simulate(self, jobs: Sequence[SharedJob], gpu_memory_mib: float) -> SharingOutcome:
        """Run ``jobs`` on one GPU with ``gpu_memory_mib`` of memory until all finish."""
        if gpu_memory_mib <= 0:
            raise ValueError("gpu_memory_mib must be > 0")
        names = [j.name for j in jobs]
        if len(set(names)) != len(names):
            raise ValueError("job names must be unique on one GPU")
        return _Run(self, jobs, gpu_memory_mib).run()

    def effective_rates(
        self, jobs: Sequence[SharedJob], gpu_memory_mib: float
    ) -> npt.NDArray[np.float64]:
        """Average progress rate of each job (solo seconds per wall second) until it ends.

        This is what a cluster simulator needs to advance co-located jobs between its own
        events: multiply a job's isolated throughput by its rate.
        """
        outcome = self.simulate(jobs, gpu_memory_mib)
        return np.array(
            [j.solo_s / j.run_s if j.run_s > 0 else 1.0 for j in outcome.jobs], dtype=np.float64
        )


class _JobState:
    """Mutable progress of one job inside a run."""

    __slots__ = (
        "arrived",
        "computed_since_grant",
        "ever_ran",
        "finish",
        "handovers_in",
        "index",
        "last_ran",
        "left",
        "lock_wait",
        "phase",
        "phases",
        "refill",
        "resident",
        "spec",
        "stall",
        "thrash",
    )

    def __init__(self, spec: SharedJob, index: int) -> None:
        self.spec = spec
        self.index = index
        self.phases: tuple[Phase, ...] = spec.phases()
        self.phase = 0
        self.left = self.phases[0].duration_s if self.phases else 0.0
        self.arrived = False
        self.finish: float | None = None
        self.resident = 0.0
        self.ever_ran = False
        self.last_ran = -1.0
        self.stall = 0.0
        self.computed_since_grant = 0.0
        self.lock_wait = 0.0
        self.refill = 0.0
        self.thrash = 0.0
        self.handovers_in = 0

    @property
    def active(self) -> bool:
        return self.arrived and self.finish is None

    @property
    def on_gpu_phase(self) -> bool:
        return self.active and self.phases[self.phase].on_gpu


class _Run:
    """One simulation: the jobs' progress, memory residency and the clock. Who holds the
    GPU is the shared ``GpuLock``'s decision (the daemon's lock), driven with simulated
    time; this class plays the clients: it requests when a job enters a GPU phase,
    releases early when the holder idles, and releases after a drop once the in-flight
    iteration is done."""

    def __init__(self, model: NvshareModel, specs: Sequence[SharedJob], memory: float) -> None:
        self.model = model
        self.memory = memory
        self.jobs = [_JobState(s, i) for i, s in enumerate(specs)]
        self.now = 0.0
        self.lock = GpuLock(0, model.tq_s, model.mode, memory_bytes=_bytes(memory))
        self.idle_since: float | None = None
        self.running: tuple[_JobState, ...] = ()

    # --- the lock's clients -------------------------------------------------------------

    @property
    def holder(self) -> _JobState | None:
        h = self.lock.holder
        return None if h is None else self.jobs[h]

    def apply(self, decisions: list[Decision]) -> None:
        """Act on the lock's decisions as the clients would (in order; acting may ask
        the lock again, whose answers are acted on in turn)."""
        todo = deque(decisions)
        while todo:
            d = todo.popleft()
            if isinstance(d, Grant):
                job = self.jobs[d.client_id]
                self.idle_since = None
                job.computed_since_grant = 0.0
                if d.handover:
                    job.handovers_in += 1
                    job.stall += self.model.handover_s
            elif isinstance(d, Schedule):
                # SCHED_ON: every client with GPU work asks; SCHED_OFF: nobody needs to.
                if d.serialized and self.jobs[d.client_id].on_gpu_phase:
                    todo.extend(self.lock.request(d.client_id, self.now))
            elif isinstance(d, Revoke):
                # Not from the model's lock (no revoke grace: its clients always release);
                # handled as the interposer does: ask again for the next GPU call.
                self.idle_since = None
                if self.jobs[d.client_id].on_gpu_phase:
                    todo.extend(self.lock.request(d.client_id, self.now))
            # Drop: the holder releases in ``settle`` once its in-flight iteration is done.

    def release(self, job: _JobState) -> None:
        self.idle_since = None
        self.apply(self.lock.released(job.index, self.now))

    def may_drop(self, holder: _JobState) -> bool:
        """The drop's synchronize waits for the in-flight iteration, so a holder always
        gets its refill plus one sweep of work (or the rest of its phase) per grant: this
        is what keeps a tiny TQ from livelocking two jobs that keep evicting each other."""
        if not holder.on_gpu_phase:
            return True
        need = min(self.model.paging.sweep_s, holder.left)
        return holder.stall <= 0 and holder.computed_since_grant >= need - 1e-12

    # --- memory ------------------------------------------------------------------------

    def update_running(self) -> None:
        """Recompute who is on the GPU; price refills or thrashing when that changes."""
        if self.lock.serialized:
            h = self.holder
            running: tuple[_JobState, ...] = (h,) if h is not None and h.on_gpu_phase else ()
        else:
            running = tuple(j for j in self.jobs if j.on_gpu_phase)
        if running == self.running:
            return
        self.running = running
        total = sum(j.spec.working_set_mib for j in running)
        if total > self.memory:
            # Thrashing: memory ends up shared in proportion to the working sets.
            for j in self.jobs:
                j.resident = self.memory * j.spec.working_set_mib / total if j in running else 0.0
            for j in running:
                j.ever_ran = True
            return
        for j in running:
            self.fill(j, running)

    def fill(self, job: _JobState, running: tuple[_JobState, ...]) -> None:
        need = job.spec.working_set_mib - job.resident
        if need <= 1e-9:
            job.ever_ran = True
            return
        free = self.memory - sum(j.resident for j in self.jobs)
        evicted = 0.0
        # Least recently run first: the pages the driver's LRU would pick.
        for victim in sorted(self.jobs, key=lambda j: (j.last_ran, j.index)):
            if need - free - evicted <= 1e-9:
                break
            if victim is job or victim in running:
                continue
            take = min(victim.resident, need - free - evicted)
            victim.resident -= take
            evicted += take
        # The first load of a job is part of its solo run time; a reload is not.
        fetched = need if job.ever_ran else 0.0
        job.stall += self.model.paging.refill_s(fetched, evicted)
        job.resident = job.spec.working_set_mib
        job.ever_ran = True

    def rates(self) -> dict[int, float]:
        """Progress rate (solo seconds per second) of each running, non-stalled job."""
        computing = [j for j in self.running if j.stall <= 0]
        if not computing:
            return {}
        wss = [j.spec.working_set_mib for j in self.running]
        extra = dict(
            zip(
                (j.index for j in self.running),
                self.model.paging.thrash_cost(wss, self.memory),
                strict=True,
            )
        )
        # The GPU and the fault path are one serial resource shared by the running jobs;
        # a job alone is bounded by its own fault stalls.
        demand = sum(self.model.gpu_busy + extra[j.index] for j in computing)
        shared = 1.0 / max(1.0, demand)
        return {j.index: min(1.0 / (1.0 + extra[j.index]), shared) for j in computing}

    def thrashing(self) -> bool:
        return sum(j.spec.working_set_mib for j in self.running) > self.memory

    # --- the clock -----------------------------------------------------------------------

    def next_dt(self, rates: dict[int, float]) -> float:
        candidates = [
            j.spec.arrival_s - self.now for j in self.jobs if not j.arrived and j.finish is None
        ]
        running = set(self.running)
        for j in self.jobs:
            if not j.active:
                continue
            if not j.on_gpu_phase:
                candidates.append(j.left)
            elif j in running and j.stall > 0:
                candidates.append(j.stall)
            elif j.index in rates:
                candidates.append(j.left / rates[j.index])
                need = min(self.model.paging.sweep_s, j.left) - j.computed_since_grant
                if j is self.holder and self.lock.queue and need > 0:
                    candidates.append(need / rates[j.index])
        deadline = self.lock.next_deadline()
        if deadline is not None:
            candidates.append(deadline - self.now)
        if self.holder is not None and self.idle_since is not None:
            candidates.append(self.idle_since + self.model.idle_release_s - self.now)
        positive = [c for c in candidates if c > 0]
        return min(positive) if positive else 0.0

    def advance(self, dt: float, rates: dict[int, float]) -> None:
        running = set(self.running)
        thrashing = self.thrashing()
        for j in self.jobs:
            if not j.active:
                continue
            if not j.on_gpu_phase:
                j.left -= dt
            elif j not in running:
                j.lock_wait += dt
            elif j.stall > 0:
                j.stall = max(0.0, j.stall - dt)
                j.refill += dt
            else:
                done = rates[j.index] * dt
                j.left -= done
                j.computed_since_grant += done
                j.last_ran = self.now + dt
                if thrashing:
                    j.thrash += dt
        self.now += dt

    def settle(self) -> None:
        """Handle everything due at ``now``: arrivals, phase ends, quanta, idle releases."""
        eps = 1e-9 * max(1.0, self.now)
        for j in self.jobs:
            if not j.arrived and j.finish is None and j.spec.arrival_s <= self.now + eps:
                # A client registers and reports its working set (the interposer's MEM).
                self.apply(self.lock.register(j.index, 0, j.spec.name, self.now))
                used = _bytes(j.spec.working_set_mib)
                self.apply(self.lock.memory(j.index, used, 0, self.now))
                j.arrived = True
                self.enter_phase(j)
        for j in self.jobs:
            if j.active and j.left <= eps and not (j.on_gpu_phase and j.stall > 0):
                j.phase += 1
                self.enter_phase(j)
        idle_since = self.idle_since
        h = self.holder
        if (
            h is not None
            and idle_since is not None
            and self.now >= idle_since + self.model.idle_release_s - eps
        ):
            self.release(h)  # early release: the holder has had no GPU work for a while
        self.apply(self.lock.tick(self.now))
        h = self.holder
        if h is not None and self.lock.dropping == h.index and self.may_drop(h):
            self.release(h)
            if h.on_gpu_phase:  # it still has GPU work: back of the line
                self.apply(self.lock.request(h.index, self.now))

    def enter_phase(self, j: _JobState) -> None:
        while j.phase < len(j.phases) and j.phases[j.phase].duration_s <= 0:
            j.phase += 1
        if j.phase >= len(j.phases):
            j.finish = self.now
            j.left = 0.0
            if self.holder is j:
                self.idle_since = None
            self.apply(self.lock.disconnect(j.index, self.now))
            return
        j.left = j.phases[j.phase].duration_s
        if j.phases[j.phase].on_gpu:
            if self.holder is j:
                self.idle_since = None
            else:
                self.apply(self.lock.request(j.index, self.now))
        elif self.holder is j:
            self.idle_since = self.now

    def run(self) -> SharingOutcome:
        self.settle()
        for _ in range(_MAX_EVENTS):
            if all(j.finish is not None for j in self.jobs):
                break
            self.update_running()
            rates = self.rates()
            dt = self.next_dt(rates)
            self.advance(dt, rates)
            self.settle()
        else:  # pragma: no cover - a model bug, not a user error
            raise RuntimeError("nvshare simulation did not finish")
        pressure = sum(j.spec.working_set_mib for j in self.jobs) / self.memory
        outcomes = tuple(
            JobOutcome(
                name=j.spec.name,
                arrival_s=j.spec.arrival_s,
                finish_s=float(j.finish if j.finish is not None else self.now),
                solo_s=j.spec.solo_s,
                lock_wait_s=j.lock_wait,
                refill_s=j.refill,
                thrash_s=j.thrash,
                handovers_in=j.handovers_in,
            )
            for j in self.jobs
        )
        return SharingOutcome(outcomes, self.lock.handovers, pressure)
