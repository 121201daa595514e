"""One run from its command-line description: parse, pick the mechanism, summarize.

The same function serves ``simulate`` and every sweep worker process, so a sweep's runs
are exactly what ``simulate`` would do with the same arguments.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass

from gpumosaic.errors import InputError
from gpumosaic.metrics.summary import Summary, summarize
from gpumosaic.model.cluster import ClusterSpec
from gpumosaic.model.job import JobSpec
from gpumosaic.model.state import ClusterState
from gpumosaic.placement.filter import explain
from gpumosaic.policies.ordering import QUEUE_ORDERS
from gpumosaic.sharing.speed import build_speed_model
from gpumosaic.sim.gandiva_scoring import AFFINITY, is_affinity
from gpumosaic.sim.result import SimResult
from gpumosaic.sim.simulator import simulate
from gpumosaic.workloads.spec import ParsedWorkload, parse_cluster, parse_workload
from gpumosaic.workloads.throughputs import GavelThroughputTable

MECHANISMS = ("auto", "event", "rounds")
# Placement when none is named: FGD for the event and round mechanisms; under
# ``--sharing gandiva`` Gandiva's own order (least loaded first within an affinity tier).
DEFAULT_PLACEMENT = "fgd"


@dataclass(frozen=True, slots=True)
class RunRequest:
    cluster: str
    workload: str
    policy: str = "fifo"
    placement: str | None = None  # None: the mechanism's default (resolved_placement)
    seed: int = 0
    gpus_per_node: int = 1
    mechanism: str = "auto"
    backfill: bool = True
    round_s: float = 360.0
    resolve_interval_s: float = 1920.0
    sharing: str = "none"

    def to_json(self) -> dict[str, object]:
        return {**asdict(self), "placement": self.resolved_placement()}

    @property
    def gandiva(self) -> bool:
        return is_gandiva(self.sharing)

    def resolved_placement(self) -> str:
        if self.placement is not None:
            return self.placement
        return AFFINITY if self.gandiva else DEFAULT_PLACEMENT

    def resolved_mechanism(self) -> str:
        if self.mechanism not in MECHANISMS:
            raise InputError(f"must be one of {', '.join(MECHANISMS)}", field="--mechanism")
        if self.mechanism != "auto":
            return self.mechanism
        return "event" if self.policy.lower() in QUEUE_ORDERS else "rounds"


def is_gandiva(sharing: str) -> bool:
    """``--sharing gandiva[:...]`` runs Gandiva's own scheduler instead of a mechanism."""
    return sharing.strip().lower().startswith("gandiva")


@dataclass(frozen=True, slots=True)
class RunOutcome:
    result: SimResult
    summary: Summary
    never_fit_lines: tuple[str, ...]


def run_request(request: RunRequest, progress: Callable[[float], None] | None = None) -> RunOutcome:
    cluster = parse_cluster(request.cluster, request.gpus_per_node)
    parsed = parse_workload(request.workload, request.seed)
    workload = parsed.workload
    sharing = request.sharing.strip().lower()
    placement = request.resolved_placement()
    if request.gandiva:
        from gpumosaic.sim.gandiva import simulate_gandiva
        from gpumosaic.sim.gandiva_config import parse_gandiva_options

        if request.policy.lower() not in QUEUE_ORDERS:
            raise InputError(
                f"gandiva is itself the time-slicing mechanism: --sharing gandiva takes a "
                f"queue order ({', '.join(QUEUE_ORDERS)}), not {request.policy!r}; Gavel's "
                "model of Gandiva as an allocation policy is --policy gandiva without "
                "--sharing gandiva",
                field="--policy",
            )
        if request.mechanism == "rounds":
            raise InputError(
                "--sharing gandiva runs Gandiva's own event-driven scheduler, not Gavel's "
                "rounds: drop --mechanism rounds (or use --policy gandiva on the rounds)",
                field="--mechanism",
            )
        try:
            config = parse_gandiva_options(request.sharing)
        except ValueError as err:
            raise InputError(str(err), field="--sharing") from None
        result = simulate_gandiva(
            cluster,
            workload,
            config,
            seed=request.seed,
            order=request.policy,
            placement=placement,
            backfill=request.backfill,
        )
    elif is_affinity(placement):
        raise InputError(
            "affinity is Gandiva's own server order: only with --sharing gandiva",
            field="--placement",
        )
    elif request.resolved_mechanism() == "event":
        if request.policy.lower() not in QUEUE_ORDERS:
            known = ", ".join(QUEUE_ORDERS)
            raise InputError(f"the event mechanism takes a queue order ({known})", field="--policy")
        unmeasured = [
            m.name
            for m in cluster.gpu_models
            if isinstance(workload.throughputs, GavelThroughputTable) and m.throughput_key is None
        ]
        if unmeasured:
            # Rounds give such GPUs rate 0 (the policy avoids them); a placement cannot.
            raise InputError(
                f"Gavel's throughput table has no rates for {', '.join(unmeasured)}: use "
                "v100/p100/k80 (or their V100M16/V100M32 variants), a duration-based job "
                "list, or --mechanism rounds with a Gavel policy",
                field="--cluster",
            )
        result = simulate(
            cluster,
            workload,
            placement=placement,
            order=request.policy,
            seed=request.seed,
            backfill=request.backfill,
            progress=progress,
            speed=build_speed_model(request.sharing),
        )
    else:
        from gpumosaic.policies.registry import POLICY_NAMES

        if request.policy not in POLICY_NAMES:
            known = ", ".join(dict.fromkeys((*QUEUE_ORDERS, *POLICY_NAMES)))
            raise InputError(
                f"unknown policy {request.policy!r} (known: {known})", field="--policy"
            )
        from gpumosaic.sim.rounds import run_rounds

        result = run_rounds(
            cluster,
            workload,
            policy=request.policy,
            placement=placement,
            seed=request.seed,
            round_s=request.round_s,
            resolve_interval_s=request.resolve_interval_s,
            progress=progress,
            speed=None if sharing == "none" else build_speed_model(request.sharing),
        )
    return RunOutcome(result, summarize(result), _never_fit_lines(result, parsed, cluster))


def _never_fit_lines(
    result: SimResult, parsed: ParsedWorkload, cluster: ClusterSpec
) -> tuple[str, ...]:
    """One line per job rejected as never fitting, naming file, row and field if known."""
    rejected = [r for r in result.records if r.reason.startswith("never_fits")]
    if not rejected:
        return ()
    state = ClusterState(cluster)
    jobs = {j.id: j for j in parsed.job_list.jobs} if parsed.job_list else {}
    lines = []
    for record in rejected:
        job = jobs.get(record.job_id)
        where = record.name or f"job {record.job_id}"
        field = "num_gpu"
        if parsed.job_list is not None and job is not None:
            row = parsed.job_list.row(job.id)
            field = _never_fit_field(state, job)
            where = f"{parsed.job_list.path}, row {row}, field {field!r}"
        lines.append(f"{where}: {record.reason}")
    return tuple(lines)


def _never_fit_field(state: ClusterState, job: JobSpec) -> str:
    if job.num_gpu and not state.model_mask(job.allowed_models).any():
        return "gpu_spec"
    if job.num_gpu > int(state.num_gpus.max()):
        return "num_gpu"
    if job.cpu_milli > int(state.cpu_capacity.max()):
        return "cpu_milli"
    if job.memory_mib > int(state.memory_capacity.max()):
        return "memory_mib"
    return explain(state, job).reason.value
