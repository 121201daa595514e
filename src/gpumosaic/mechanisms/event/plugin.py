"""``--mechanism event``: non-preemptive, event-driven (``sim/simulator.py`` around the
clock-free ``mechanisms.event.SchedulingPass``); ``--policy`` is a queue order.

Light to import (see ``base``): the simulator and its imports load in ``simulate``."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, cast

from gpumosaic.errors import InputError
from gpumosaic.mechanisms.contract import (
    NO_HOOKS,
    PolicyKind,
    ProgressCallback,
    RunParts,
    SimHooks,
    check_placement,
)
from gpumosaic.sharing.spec import parse_sharing

if TYPE_CHECKING:
    from collections.abc import Sequence

    from gpumosaic.model.job import JobSpec
    from gpumosaic.model.state import ClusterState
    from gpumosaic.placement.background import BackgroundLoad
    from gpumosaic.placement.workload import TargetWorkload
    from gpumosaic.results.result import SimResult
    from gpumosaic.run.description import RunDescription
    from gpumosaic.sharing.speed import SpeedModel
    from gpumosaic.workloads.workload import Workload


class EventMechanism:
    name = "event"
    policy_kind = PolicyKind.QUEUE_ORDER
    own_placement: str | None = None
    default_placement = "fgd"
    default_policy = "fifo"
    estimates_throughputs = False  # --estimate-throughputs is the rounds' decider's

    def check(self, description: RunDescription) -> None:
        from gpumosaic.policies.ordering import QUEUE_ORDERS

        if description.policy.strip().lower() not in QUEUE_ORDERS:
            known = ", ".join(QUEUE_ORDERS)
            raise InputError(f"the event mechanism takes a queue order ({known})", field="--policy")
        check_placement(description.placement)
        parse_sharing(description.sharing)  # the grammar build_speed_model builds from

    def target(self, workload: Workload) -> TargetWorkload:
        return self.target_of(workload.target_sample())

    def target_of(self, jobs: Sequence[JobSpec]) -> TargetWorkload:
        from gpumosaic.placement.workload import TargetWorkload

        return TargetWorkload.from_jobs(jobs)

    def sharing(self, description: RunDescription) -> SpeedModel:
        from gpumosaic.sharing.speed import build_speed_model

        return build_speed_model(description.sharing)

    def simulate(
        self, parts: RunParts, progress: ProgressCallback | None, hooks: SimHooks = NO_HOOKS
    ) -> SimResult:
        hooks.refuse_all_but(self.name)
        from gpumosaic.mechanisms.event.simulator import EventSimulator
        from gpumosaic.policies.ordering import QueueOrder
        from gpumosaic.sharing.speed import SpeedModel
        from gpumosaic.workloads.throughputs import GavelThroughputTable

        workload, cluster = parts.workload, parts.cluster
        if isinstance(workload.throughputs, GavelThroughputTable):
            unmeasured = [m.name for m in cluster.gpu_models if m.throughput_key is None]
            if unmeasured:
                # Rounds give such GPUs rate 0 (the policy avoids them); a placement cannot.
                raise InputError(
                    f"Gavel's throughput table has no rates for {', '.join(unmeasured)}: use "
                    "v100/p100/k80 (or their V100M16/V100M32 variants), a duration-based job "
                    "list, or --mechanism rounds with a Gavel policy",
                    field="--cluster",
                )
        assert parts.placement is not None
        initial, background = self._background(parts)
        simulator = EventSimulator(
            cluster,
            workload,
            parts.placement,
            cast(QueueOrder, parts.policy),
            backfill=parts.description.backfill,
            target=parts.target,
            progress=progress,
            speed=cast(SpeedModel, parts.sharing),
            rng=parts.rng,
            initial_state=initial,
        )
        result = simulator.run()
        if background is None:
            return result
        return replace(result, background=background)

    @staticmethod
    def _background(parts: RunParts) -> tuple[ClusterState | None, BackgroundLoad | None]:
        """The starting state pre-filled with ``--background`` load, by the run's own
        placement and Generator (before any job arrives)."""
        if parts.description.background is None:
            return None, None
        from gpumosaic.model.state import ClusterState
        from gpumosaic.placement.background import BackgroundSpec, prefill
        from gpumosaic.traces.openb import load_openb_tasks

        spec = BackgroundSpec.parse(parts.description.background)
        tasks = load_openb_tasks(spec.source)
        state = ClusterState(parts.cluster)
        assert parts.placement is not None
        load = prefill(state, tasks, parts.placement, spec.fraction, parts.rng, spec.source)
        return state, load
