"""How a lease becomes running processes: the executor contract, and an in-process
executor whose "processes" follow the lease protocol at a given rate (benchmarks and
fast tests of the drivers and the supervisor; no subprocess).

An executor starts the processes of a lease (one per rank), stops them (SIGTERM, then
SIGKILL after a grace period) and says when they are gone (``poll``). It never decides
anything: the round driver does.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from gpumosaic.runtime.leases import LeaseTable

# A packed pair's members are told their partner's job id (and its job type,
# ``gpumosaic.lease.ENV_PACKED_WITH``).
ENV_PACKED_WITH_JOB = "GPUMOSAIC_PACKED_WITH_JOB"


@dataclass(frozen=True, slots=True)
class RankLaunch:
    """One process of a lease: where it runs and which GPUs it sees."""

    rank: int
    node_id: str  # the executor's id of the machine it runs on
    ip: str
    devices: tuple[int, ...]  # CUDA device indices on that node (empty: CPU only)
    gpu_share: float  # GPUs it holds (GPUs x milli / 1000)


@dataclass(frozen=True, slots=True)
class LaunchSpec:
    lease_id: str
    job_id: int
    command: str
    workdir: str
    env: tuple[tuple[str, str], ...]  # the job's and gpumosaic's variables, all ranks
    log_path: str
    gpu_model: str
    gpu_milli: int
    ranks: tuple[RankLaunch, ...]


@dataclass(frozen=True, slots=True)
class ExitReport:
    """A lease's processes are gone."""

    lease_id: str
    exit_code: int | None  # first non-zero rank exit code, else 0; None if never known
    lost: bool  # the actor or its node died, or it never started: not the job's fault
    log_tail: str
    detail: str = ""


class Executor(Protocol):
    def launch(self, spec: LaunchSpec) -> None: ...

    def stop(self, lease_id: str, grace_s: float) -> None: ...

    def poll(self) -> list[ExitReport]: ...

    def reap(self, lease_id: str, ranks: int) -> None: ...

    def shutdown(self) -> None: ...


def rank_env(spec: LaunchSpec, rank: RankLaunch, master_port: int) -> dict[str, str]:
    """The environment of one rank: the lease's, plus rank, world size and GPUs. A rank
    with no GPU gets ``CUDA_VISIBLE_DEVICES=""``: an executor may leave every GPU visible
    otherwise."""
    env = dict(spec.env)
    world = len(spec.ranks)
    env.update(
        {
            "GPUMOSAIC_RANK": str(rank.rank),
            "GPUMOSAIC_WORLD_SIZE": str(world),
            "CUDA_VISIBLE_DEVICES": ",".join(str(d) for d in rank.devices),
        }
    )
    if world > 1:  # torch.distributed's env:// rendezvous
        env.update(
            {
                "RANK": str(rank.rank),
                "WORLD_SIZE": str(world),
                "LOCAL_RANK": "0",
                "MASTER_ADDR": spec.ranks[0].ip,
                "MASTER_PORT": str(master_port),
            }
        )
    return env


@dataclass(slots=True)
class _Virtual:
    spec: LaunchSpec
    rate: float
    last: float
    started: bool = False
    stopping: bool = False


class InProcessExecutor:
    """Each lease is a virtual process that steps at ``rate_of(job_id, model)`` steps/s on
    ``clock`` (a member of a packed pair: ``pair_rate_of(job_id, partner_id, model)``,
    when given) and speaks the lease protocol through the ``LeaseTable`` exactly as a
    real job does over HTTP: init, reports, park at the grant's end, checkpoint and exit
    on stop, exit 0 when all steps are done."""

    def __init__(
        self,
        table: LeaseTable,
        clock: Callable[[], float],
        rate_of: Callable[[int, str], float],
        pair_rate_of: Callable[[int, int, str], float] | None = None,
    ) -> None:
        self.table = table
        self.clock = clock
        self.rate_of = rate_of
        self.pair_rate_of = pair_rate_of
        self._procs: dict[str, _Virtual] = {}
        self.launches = 0

    def launch(self, spec: LaunchSpec) -> None:
        self.launches += 1
        partner = dict(spec.env).get(ENV_PACKED_WITH_JOB)
        if partner is not None and self.pair_rate_of is not None:
            rate = self.pair_rate_of(spec.job_id, int(partner), spec.gpu_model)
        else:
            rate = self.rate_of(spec.job_id, spec.gpu_model)
        self._procs[spec.lease_id] = _Virtual(spec, rate, self.clock())

    def stop(self, lease_id: str, grace_s: float) -> None:
        proc = self._procs.get(lease_id)
        if proc is not None:
            proc.stopping = True

    def poll(self) -> list[ExitReport]:
        now = self.clock()
        out: list[ExitReport] = []
        table = self.table
        for lease_id, proc in list(self._procs.items()):
            if not proc.started:
                table.init(lease_id, 0, 0)
                proc.started = True
            lease = table.get(lease_id)
            if lease is None:  # fenced
                del self._procs[lease_id]
                out.append(ExitReport(lease_id, None, True, "", "fenced"))
                continue
            if proc.stopping or lease.stop:
                table.checkpoint(lease_id, 0, lease.steps)
                del self._procs[lease_id]
                out.append(ExitReport(lease_id, 0, False, ""))
                continue
            if lease.parked:
                proc.last = now
                continue
            limit = min(lease.until_step, lease.total_steps)
            steps = min(lease.steps + proc.rate * (now - proc.last), limit)
            iter_s = lease.iter_s + (now - proc.last)
            proc.last = now
            at_end = steps >= limit or now >= lease.deadline
            table.report(lease_id, 0, steps, iter_s, at_end)
            if steps >= lease.total_steps:
                table.checkpoint(lease_id, 0, steps)
                del self._procs[lease_id]
                out.append(ExitReport(lease_id, 0, False, ""))
        return out

    def reap(self, lease_id: str, ranks: int) -> None:
        self._procs.pop(lease_id, None)

    def shutdown(self) -> None:
        self._procs.clear()
