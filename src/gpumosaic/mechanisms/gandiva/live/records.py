"""What the live Gandiva driver counts and writes down: its counters, the hand-over times
it measures, and each job's suspensions, migrations and partner as the store shows them
(``ShownCounts``: the one owner of those rows while the service runs)."""

from __future__ import annotations

from dataclasses import dataclass, field

from gpumosaic.mechanisms.gandiva import GandivaDecider, Pack, Reject, Step, Unpack
from gpumosaic.runtime.state.records import GandivaJobRow
from gpumosaic.runtime.state.store import Store


@dataclass(frozen=True, slots=True)
class Where:
    """A node and its GPUs (ClusterState indices), as a set holds them; ``more``: a
    gang's GPUs on its other servers, (node, GPUs) each."""

    node: int
    gpus: tuple[int, ...]
    more: tuple[tuple[int, tuple[int, ...]], ...] = ()

    @property
    def parts(self) -> tuple[tuple[int, tuple[int, ...]], ...]:
        return ((self.node, self.gpus), *self.more)

    @property
    def shareable(self) -> bool:
        """One GPU of one server: a job that may be packed beside another."""
        return len(self.gpus) == 1 and not self.more


@dataclass(slots=True)
class GandivaLiveCounters:
    """What the live driver decided (``/metrics``); the decider's own counts and the
    supervisor's (launches, stops, lost, retries) are separate."""

    suspensions: int = 0  # Suspend and Unpack actions executed
    resumes: int = 0
    migrations: int = 0
    packs: int = 0
    unpacks: int = 0
    rejected: int = 0
    wakes: int = 0
    observations: int = 0
    renewals: int = 0


@dataclass(slots=True)
class HandOverTimes:
    """What the decider's actions really cost live, in job time (the service's clock):
    from the decision to the first lease call of the job's new process. ``start``: a
    first start onto free GPUs; ``switch``: a resume at a quantum's end or after a finish
    (the outgoing job's checkpoint and exit, then the launch), or a move within a server;
    ``migration``: a move to another server (checkpoint, exit, relaunch there); ``pack``:
    a guest launched beside its running host. The simulator models them as
    ``GandivaConfig.start_s``, ``switch_s`` and ``migration_cost_s``."""

    start: list[float] = field(default_factory=list)
    switch: list[float] = field(default_factory=list)
    migration: list[float] = field(default_factory=list)
    pack: list[float] = field(default_factory=list)


class ShownCounts:
    """Per job: suspensions and migrations (this run's plus earlier runs') and the
    partner, written to the store where they changed."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._base: dict[int, GandivaJobRow] = {}  # counts of earlier runs of the service
        self._shown: dict[int, GandivaJobRow] = {}  # what the store has now
        self._packed_shown: set[int] = set()  # jobs the store shows packed

    def admit(self, job_id: int) -> None:
        self._base[job_id] = self.store.gandiva_job(job_id) or GandivaJobRow(job_id)

    def save(self, decider: GandivaDecider, step: Step) -> None:
        """Only the jobs a step can change are looked at: those its actions name and
        those in GPU sets (a finish changes its partner's)."""
        ids: set[int] = set()
        for action in step.actions:
            match action:
                case Pack(guest_id=guest, host_id=host) | Unpack(guest_id=guest, host_id=host):
                    ids.update((guest, host))
                case Reject():
                    pass
                case _:
                    ids.add(action.job_id)
        for group in decider.sets:
            ids.update(j.id for j in group.jobs())
        for job_id in ids | self._packed_shown:
            self._save(decider, job_id)

    def _save(self, decider: GandivaDecider, job_id: int) -> None:
        gjob = decider.jobs.get(job_id)
        base = self._base.get(job_id)
        if gjob is None or base is None:
            return
        group = decider.group(gjob.group) if gjob.group >= 0 else None
        partner = None
        if group is not None:
            partner = next((j.id for j in group.unit_of(gjob).jobs if j is not gjob), None)
        row = GandivaJobRow(
            job_id, base.suspensions + gjob.suspensions, base.migrations + gjob.migrations, partner
        )
        shown = self._shown.get(job_id)
        if shown == row or (shown is None and row == GandivaJobRow(job_id)):
            return
        self.store.save_gandiva_job(row)
        self._shown[job_id] = row
        if partner is None:
            self._packed_shown.discard(job_id)
        else:
            self._packed_shown.add(job_id)

    def packed_now(self) -> int:
        return len(self._packed_shown)
