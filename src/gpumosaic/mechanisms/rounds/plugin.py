"""``--mechanism rounds``: Gavel's round mechanism (``mechanisms/rounds/sim.py`` around the
clock-free ``mechanisms.rounds.RoundDecider``); ``--policy`` is a Gavel policy.

Light to import (see ``base``): the simulator and its imports load in ``simulate``."""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from gpumosaic.errors import InputError, unknown_name
from gpumosaic.mechanisms.contract import (
    NO_HOOKS,
    LiveParts,
    PolicyKind,
    ProgressCallback,
    RunParts,
    SimHooks,
    check_placement,
    refuse_background,
)
from gpumosaic.sharing.spec import parse_sharing

if TYPE_CHECKING:
    from collections.abc import Sequence

    from gpumosaic.mechanisms.rounds.live.decider import LiveRoundDecider
    from gpumosaic.model.job import JobSpec
    from gpumosaic.placement.workload import TargetWorkload
    from gpumosaic.results.result import SimResult
    from gpumosaic.run.description import RunDescription
    from gpumosaic.sharing.speed import SpeedModel
    from gpumosaic.workloads.workload import Workload


class RoundsMechanism:
    name = "rounds"
    policy_kind = PolicyKind.ALLOCATION
    own_placement: str | None = None
    default_placement = "fgd"
    default_policy = "max_min_fairness_perf"  # serve's, without --policy
    estimates_throughputs = True  # the decider's estimation (--estimate-throughputs)

    def check(self, description: RunDescription) -> None:
        from gpumosaic.policies.ordering import QUEUE_ORDERS
        from gpumosaic.policies.registry import POLICY_NAMES
        from gpumosaic.sharing.spec import is_gandiva

        refuse_background(description, "rounds")

        if is_gandiva(description.sharing):
            raise InputError(
                "--sharing gandiva runs Gandiva's own event-driven scheduler, not Gavel's "
                "rounds: drop --mechanism rounds (or use --policy gandiva on the rounds)",
                field="--mechanism",
            )
        if description.policy not in POLICY_NAMES:
            if description.policy in QUEUE_ORDERS:
                raise InputError(
                    "is a queue order of the event mechanism; the rounds take a Gavel "
                    "allocation policy (e.g. max_min_fairness_perf, or fifo for Gavel's "
                    "FIFO): drop --mechanism rounds or choose one",
                    field="--policy",
                    value=description.policy,
                )
            raise unknown_name(
                "policy", description.policy, (*QUEUE_ORDERS, *POLICY_NAMES), field="--policy"
            )
        check_placement(description.placement)
        parse_sharing(description.sharing)  # the grammar build_speed_model builds from

    def target(self, workload: Workload) -> TargetWorkload:
        return self.target_of(workload.target_sample())

    def target_of(self, jobs: Sequence[JobSpec]) -> TargetWorkload:
        from gpumosaic.placement.workload import TargetWorkload

        return TargetWorkload.from_jobs(jobs)

    def live_decider(self, parts: LiveParts) -> LiveRoundDecider:
        """The live round decider over the parts, its two Generators spawned from the
        run's root one as the simulator spawns them; rates from the submissions, else
        Gavel's table (the prior), else profiled and estimated."""
        from gpumosaic.mechanisms.rounds.decision import RoundConfig
        from gpumosaic.mechanisms.rounds.estimation import ThroughputEstimation
        from gpumosaic.mechanisms.rounds.live.decider import LiveRoundDecider, PriorThroughputs
        from gpumosaic.policies.base import Policy
        from gpumosaic.workloads.throughputs import GavelThroughputTable

        d = parts.description
        assert parts.placement is not None
        shuffle_rng, place_rng = parts.rng.spawn(2)
        table = GavelThroughputTable.load()
        return LiveRoundDecider(
            parts.cluster,
            cast(Policy, parts.policy),
            parts.placement,
            PriorThroughputs(table),
            RoundConfig(d.round_s, d.resolve_interval_s),
            shuffle_rng,
            place_rng,
            estimation=ThroughputEstimation(parts.cluster.gpu_models, table),
        )

    def sharing(self, description: RunDescription) -> SpeedModel | None:
        if description.sharing.strip().lower() == "none":
            return None  # the rounds' own sharing only: fractions and packed pairs
        from gpumosaic.sharing.speed import build_speed_model

        return build_speed_model(description.sharing)

    def simulate(
        self, parts: RunParts, progress: ProgressCallback | None, hooks: SimHooks = NO_HOOKS
    ) -> SimResult:
        hooks.refuse_all_but(self.name, "on_plan", "launch_latency_s")
        from gpumosaic.mechanisms.rounds.estimation import EstimationConfig
        from gpumosaic.mechanisms.rounds.sim import RoundConfig, RoundSimulator
        from gpumosaic.policies.base import PairCandidates, Policy
        from gpumosaic.sharing.speed import SpeedModel

        d = parts.description
        assert parts.placement is not None
        policy = cast(Policy, parts.policy)  # an allocation policy (policy_kind)
        if d.estimate_throughputs and policy.traits.pairs is not PairCandidates.NONE:
            raise InputError(
                "estimates isolated rates only, and a packed policy would read its pairs' "
                "rates from the table: drop --estimate-throughputs or use a policy "
                "without pairs",
                field="--estimate-throughputs",
            )
        simulator = RoundSimulator(
            parts.cluster,
            parts.workload,
            policy,
            parts.placement,
            RoundConfig(d.round_s, d.resolve_interval_s),
            progress,
            cast(SpeedModel | None, parts.sharing),
            rng=parts.rng,
            target=parts.target,
            estimation=EstimationConfig() if d.estimate_throughputs else None,
            on_plan=hooks.on_plan,
            launch_latency_s=hooks.launch_latency_s,
        )
        return simulator.run()
