"""What Gandiva's decider asks a driver to do: typed actions, in the order decided.

A driver executes them on its jobs: the simulator by its progress model, a live driver
by launching, checkpointing and relaunching real jobs. ``node`` and ``gpus`` are
ClusterState indices. An action never carries a time of its own except ``Resume.at_s``,
when the resumed job holds the GPUs (after the hand-over the decider charged).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from gpumosaic.results.outcome import Rejection


@dataclass(frozen=True, slots=True)
class Start:
    """Run a job for the first time on these GPUs (``running``: it holds them now;
    False: it joined a time-sliced set and waits for its turn, suspended)."""

    job_id: int
    node: int
    gpus: tuple[int, ...]
    running: bool


@dataclass(frozen=True, slots=True)
class StartGang:
    """Run a job that fits only across servers (``JobSpec.may_span_nodes``) on GPUs of
    several servers at once, as one gang: ``parts`` are (node, GPUs) per server, all of
    one GPU model. It holds them alone until it ends (never time-sliced, packed or
    migrated), so it always runs from now."""

    job_id: int
    parts: tuple[tuple[int, tuple[int, ...]], ...]


@dataclass(frozen=True, slots=True)
class Suspend:
    """Stop a running job at a mini-batch boundary and keep its state off the GPU."""

    job_id: int
    node: int


@dataclass(frozen=True, slots=True)
class Resume:
    """Bring a suspended job back onto these GPUs; it runs from ``at_s``."""

    job_id: int
    node: int
    gpus: tuple[int, ...]
    at_s: float


@dataclass(frozen=True, slots=True)
class Pack:
    """Run ``guest`` on ``host``'s GPU beside it, on trial (``running``: the host holds
    the GPU now, so the guest resumes there now; otherwise both wait for their turn)."""

    guest_id: int
    host_id: int
    node: int
    gpus: tuple[int, ...]
    running: bool


@dataclass(frozen=True, slots=True)
class Unpack:
    """Introspection undid a pair: its summed normalized rate was ``gain`` (time-slicing
    gives 1). The guest is suspended (it takes turns again, or goes back to the queue)."""

    guest_id: int
    host_id: int
    node: int
    gain: float


class MoveReason(StrEnum):
    DEFRAGMENT = "defragment"  # free a whole server for a waiting multi-GPU job
    SPREAD = "spread"  # a waiting (time-sliced or packed) job onto GPUs that became free


@dataclass(frozen=True, slots=True)
class Migrate:
    """Checkpoint a job and relaunch it on another server's GPUs (``same_node``: a plain
    suspend/resume onto other GPUs of its server). It runs again from ``at_s`` if it
    holds the GPUs there."""

    job_id: int
    from_node: int
    to_node: int
    gpus: tuple[int, ...]
    reason: MoveReason
    at_s: float

    @property
    def same_node(self) -> bool:
        return self.from_node == self.to_node


@dataclass(frozen=True, slots=True)
class Reject:
    job_id: int
    reason: Rejection


Action = Start | StartGang | Suspend | Resume | Pack | Unpack | Migrate | Reject
