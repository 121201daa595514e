"""The server side of the lease protocol: what each running lease may do, in memory.

A lease grants a job steps (``until_step``, absolute) and time (``deadline``, on the
service clock). The job (``gpumosaic.lease``) reports its steps as it goes, renews at
75 % of the grant, and at the end of the grant *parks*: its last report carries
``at_end`` and waits for the round decision. The round driver then either extends the
lease (same GPUs next round: the process goes on, same PID) or tells it to stop (the job
checkpoints and exits; SIGTERM and a grace period back this up).

One owner (``LeaseTable``) behind one lock: the API threads call ``init``/``report``/
``checkpoint``, the driver calls ``grant``/``extend``/``stop``/``end``. Durable facts
(checkpoints, PIDs) go to the store in the same call.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from gpumosaic.runtime.state.store import Store

RENEW_FRACTION = 0.75  # Gavel's LEASE_UPDATE_FRACTION


@dataclass(frozen=True, slots=True)
class Grant:
    """What the job may do now (the wire format of every lease answer)."""

    lease_id: str
    until_step: float  # absolute step count at which to stop iterating
    seconds_left: float  # of the lease, on the service's clock
    total_steps: float
    stop: bool  # stop now: checkpoint and exit
    decision: int  # bumped by every round decision about this lease

    def to_json(self) -> dict[str, object]:
        return {
            "lease_id": self.lease_id,
            "until_step": self.until_step,
            "seconds_left": self.seconds_left,
            "total_steps": self.total_steps,
            "stop": self.stop,
            "decision": self.decision,
        }


@dataclass(slots=True)
class LiveLease:
    """Mutable state of one lease; owned by ``LeaseTable``."""

    lease_id: str
    job_id: int
    round_idx: int
    gpu_type: str
    type_index: int
    world_size: int
    total_steps: float
    until_step: float
    deadline: float
    launched_at: float
    steps_at_launch: float
    measured_grant: bool  # steps granted from a measured rate (else bounded by time only)
    steps: float = 0.0  # absolute steps done, as last reported by rank 0
    iter_s: float = 0.0  # seconds the job spent stepping in this lease (its own clock)
    contacted: bool = False
    contacted_at: float | None = None  # first call of the job (service clock)
    last_call_at: float | None = None  # its latest call (service clock)
    parked: bool = False
    finished_at: float | None = None  # rank 0 reported all the job's steps (service clock)
    stop: bool = False
    decision: int = 0
    pid: int | None = None
    extensions: int = 0
    ranks_seen: set[int] = field(default_factory=set)


class LeaseTable:
    def __init__(self, store: Store, clock: Callable[[], float]) -> None:
        self.store = store
        self.clock = clock
        self._lock = threading.Lock()
        self._leases: dict[str, LiveLease] = {}
        # Set when a lease parks or reports its last step: the round may be over.
        self.changed = threading.Event()

    # ---- driver side ---------------------------------------------------------------

    def add(self, lease: LiveLease) -> None:
        with self._lock:
            lease.steps = lease.steps_at_launch
            self._leases[lease.lease_id] = lease

    def get(self, lease_id: str) -> LiveLease | None:
        with self._lock:
            return self._leases.get(lease_id)

    def extend(self, lease_id: str, until_step: float, deadline: float, measured: bool) -> None:
        with self._lock:
            lease = self._leases[lease_id]
            lease.until_step = until_step
            lease.deadline = deadline
            lease.measured_grant = measured
            lease.parked = False
            lease.extensions += 1
            lease.decision += 1

    def stop(self, lease_id: str) -> None:
        with self._lock:
            lease = self._leases.get(lease_id)
            if lease is not None and not lease.stop:
                lease.stop = True
                lease.decision += 1

    def end(self, lease_id: str) -> LiveLease | None:
        """The lease's processes are gone: later calls with its id are fenced (410)."""
        with self._lock:
            lease = self._leases.pop(lease_id, None)
        self.changed.set()
        return lease

    def snapshot(self, lease_id: str) -> tuple[float, float, bool, bool]:
        """(steps, iter_s, parked, contacted) at this instant."""
        with self._lock:
            lease = self._leases[lease_id]
            return lease.steps, lease.iter_s, lease.parked, lease.contacted

    # ---- job side (the API) --------------------------------------------------------

    def _grant(self, lease: LiveLease) -> Grant:
        return Grant(
            lease.lease_id,
            lease.until_step,
            max(lease.deadline - self.clock(), 0.0),
            lease.total_steps,
            lease.stop,
            lease.decision,
        )

    def init(self, lease_id: str, rank: int, pid: int) -> Grant | None:
        with self._lock:
            lease = self._leases.get(lease_id)
            if lease is None:
                return None
            lease.contacted = True
            if lease.contacted_at is None:
                lease.contacted_at = self.clock()
            lease.last_call_at = self.clock()
            lease.ranks_seen.add(rank)
            record = rank == 0 and lease.pid != pid
            if rank == 0:
                lease.pid = pid
            grant = self._grant(lease)
            job_id = lease.job_id
        if record:
            self.store.record_pid(job_id, lease_id, pid, self.clock())
        return grant

    def report(
        self, lease_id: str, rank: int, steps: float, elapsed_s: float, at_end: bool
    ) -> Grant | None:
        """Progress (rank 0's steps count), and a renewal: the current grant."""
        with self._lock:
            lease = self._leases.get(lease_id)
            if lease is None:
                return None
            lease.contacted = True
            if lease.contacted_at is None:
                lease.contacted_at = self.clock()
            lease.last_call_at = self.clock()
            if rank == 0:
                lease.steps = max(lease.steps, steps)
                lease.iter_s = max(elapsed_s, 0.0)
                if at_end:
                    lease.parked = True
                    self.changed.set()
                if lease.steps >= lease.total_steps and lease.finished_at is None:
                    lease.finished_at = self.clock()
                    self.changed.set()
            return self._grant(lease)

    def decision_of(self, lease_id: str) -> int | None:
        with self._lock:
            lease = self._leases.get(lease_id)
            return None if lease is None else lease.decision

    def current(self, lease_id: str) -> Grant | None:
        with self._lock:
            lease = self._leases.get(lease_id)
            return None if lease is None else self._grant(lease)

    def checkpoint(self, lease_id: str, rank: int, steps: float) -> bool:
        """A checkpoint at ``steps``; False for a fenced lease (it must not write)."""
        with self._lock:
            lease = self._leases.get(lease_id)
            if lease is None:
                return False
            job_id = lease.job_id
            lease.last_call_at = self.clock()
            if rank == 0:
                lease.steps = max(lease.steps, steps)
        if rank == 0:
            self.store.record_checkpoint(job_id, steps, self.clock())
        return True
