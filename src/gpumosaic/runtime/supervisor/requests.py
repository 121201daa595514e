"""What a mechanism hands the process supervisor, and what it asks back.

A ``LeaseRequest`` is one lease a mechanism decided to run: where (a planned entity: node,
GPUs, model), the grant (steps and deadline) and how it is written down. ``Mechanism`` is
the few questions the supervisor asks the mechanism's live driver while it runs
processes: did the job do all its steps, a lease ended, a job left for good, the nodes
changed. The supervisor decides nothing about scheduling; the mechanism never touches a
process.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from gpumosaic.model.plan import PlannedEntity
from gpumosaic.results.outcome import Outcome

if TYPE_CHECKING:
    from gpumosaic.runtime.leases import LiveLease
    from gpumosaic.runtime.supervisor.nodes import NodeChange

# A lease's parts as the store keeps them: (node, GPU indices, milli-GPU held per GPU).
Parts = tuple[tuple[int, tuple[int, ...], int], ...]


@dataclass(frozen=True, slots=True)
class LeaseRequest:
    """One lease to launch for ``job_id`` on ``entry``'s node and GPUs.

    ``tag`` goes into the lease id (``JOB-TAG-RANDOM``) and ``round_idx`` into the store;
    ``until_step`` and ``deadline`` are the grant; ``measured``: the steps were granted
    from a measured rate; ``parts``: what the store records as held (a packed pair's
    member holds half of each GPU); ``partner``: the job it is packed with (told to the
    job); ``env``: variables added to the launch; ``gpu_milli``: what the executor
    reserves per GPU when it differs from the job's own share."""

    job_id: int
    entry: PlannedEntity
    tag: str
    round_idx: int
    type_index: int
    until_step: float
    deadline: float
    measured: bool
    parts: Parts
    partner: int | None = None
    env: tuple[tuple[str, str], ...] = ()
    gpu_milli: int | None = None

    @property
    def gpu_type(self) -> str:
        return self.entry.gpu_type

    @property
    def nodes(self) -> frozenset[int]:
        return frozenset(node for node, _, _ in self.parts)


@dataclass(slots=True)
class SupervisorCounters:
    """What the supervisor did to processes (``/metrics``)."""

    launches: int = 0
    stops: int = 0
    lost: int = 0  # leases whose actor or node died (not an attempt)
    retries: int = 0  # failed attempts that run again
    silent_stops: int = 0  # leases stopped because their process stopped calling


class Mechanism(Protocol):
    """What the supervisor asks the live driver of a mechanism."""

    def all_steps_done(self, job_id: int, steps: float) -> bool:
        """The mechanism counted every step of the job (``steps``: the last reported)."""
        ...

    def lease_started(self, request: LeaseRequest, lease_id: str, now: float) -> None:
        """The lease was launched (its processes are starting)."""
        ...

    def lease_ended(self, job_id: int, lease_id: str, lease: LiveLease | None, now: float) -> None:
        """The lease's processes are gone (before the exit is recorded)."""
        ...

    def job_ended(self, job_id: int, outcome: Outcome, now: float) -> None:
        """The job left for good: ``outcome`` is completed, failed or cancelled."""
        ...

    def nodes_changed(self, change: NodeChange, now: float) -> None:
        """A node was lost, returned or joined unused (before its leases are stopped)."""
        ...
