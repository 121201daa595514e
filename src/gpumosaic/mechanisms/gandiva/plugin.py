"""``--mechanism gandiva`` (or ``--sharing gandiva:...``): Gandiva's own scheduler, the
clock-free ``GandivaDecider`` (``mechanisms/gandiva/``: affinity, suspend-resume time
slicing, packing, migration) driven by ``mechanisms/gandiva/sim/``; ``--policy`` is a queue order,
``--sharing gandiva:key=value,...`` its options.

Light to import (see ``base``): Gandiva's package and simulator load when a description
asks for Gandiva."""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from gpumosaic.errors import InputError
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

if TYPE_CHECKING:
    from collections.abc import Sequence

    from gpumosaic.mechanisms.gandiva.config import GandivaConfig
    from gpumosaic.mechanisms.gandiva.decider import GandivaDecider
    from gpumosaic.model.job import JobSpec
    from gpumosaic.placement.workload import TargetWorkload
    from gpumosaic.results.result import SimResult
    from gpumosaic.run.description import RunDescription
    from gpumosaic.workloads.workload import Workload


class GandivaMechanism:
    name = "gandiva"
    policy_kind = PolicyKind.QUEUE_ORDER
    estimates_throughputs = False  # --estimate-throughputs is the rounds' decider's

    # Gandiva's own server order, ``mechanisms.gandiva.ranking.AFFINITY`` (spelled here so
    # that checking a description does not import the ranking's numpy;
    # tests/run/test_mechanism_registry.py checks that they agree).
    own_placement: str | None = "affinity"
    default_placement = "affinity"
    default_policy = "fifo"  # serve's, without --policy

    def check(self, description: RunDescription) -> None:
        from gpumosaic.policies.ordering import QUEUE_ORDERS

        refuse_background(description, "gandiva")
        if description.policy.strip().lower() not in QUEUE_ORDERS:
            raise InputError(
                f"gandiva is itself the time-slicing mechanism: it takes a queue order "
                f"({', '.join(QUEUE_ORDERS)}), not {description.policy!r}; Gavel's model of "
                "Gandiva as an allocation policy is --policy gandiva on the rounds",
                field="--policy",
            )
        self.sharing(description)
        check_placement(description.placement, own_order=self.own_placement)

    def target(self, workload: Workload) -> TargetWorkload:
        return self.target_of(workload.target_sample())

    def target_of(self, jobs: Sequence[JobSpec]) -> TargetWorkload:
        from gpumosaic.mechanisms.gandiva.ranking import gandiva_target

        return gandiva_target(jobs)

    def live_decider(self, parts: LiveParts) -> GandivaDecider:
        """The decider the simulator builds (``sim/``): the queue order, the placement
        (None: Gandiva's own affinity order), the run's Generator; speeds from Gavel's
        table or the live prior."""
        from gpumosaic.mechanisms.gandiva.config import GandivaConfig
        from gpumosaic.mechanisms.gandiva.decider import GandivaDecider
        from gpumosaic.mechanisms.gandiva.live.throughputs import LiveThroughputs
        from gpumosaic.policies.ordering import QueueOrder

        assert isinstance(parts.sharing, GandivaConfig)
        return GandivaDecider(
            parts.cluster,
            LiveThroughputs.load(),
            parts.sharing,
            parts.rng,
            order=cast(QueueOrder, parts.policy),
            placement=parts.placement,
            backfill=parts.description.backfill,
        )

    def sharing(self, description: RunDescription) -> GandivaConfig:
        from gpumosaic.mechanisms.gandiva.config import parse_gandiva_options
        from gpumosaic.sharing.spec import is_gandiva

        spec = description.sharing
        if spec.strip().lower() == "none":
            spec = "gandiva"  # --mechanism gandiva alone: Gandiva's defaults
        elif not is_gandiva(spec):
            raise InputError(
                f"--mechanism gandiva takes gandiva:key=value,... options, not {spec!r}",
                field="--sharing",
            )
        try:
            return parse_gandiva_options(spec)
        except ValueError as err:
            raise InputError(str(err), field="--sharing") from None

    def simulate(
        self, parts: RunParts, progress: ProgressCallback | None, hooks: SimHooks = NO_HOOKS
    ) -> SimResult:
        hooks.refuse_all_but(self.name, "on_step")
        from gpumosaic.mechanisms.gandiva.config import GandivaConfig
        from gpumosaic.mechanisms.gandiva.sim import simulate_gandiva
        from gpumosaic.policies.ordering import QueueOrder

        assert isinstance(parts.sharing, GandivaConfig)
        return simulate_gandiva(
            parts.cluster,
            parts.workload,
            parts.sharing,
            parts.rng,  # drawn from by nothing before: a queue order takes none
            window_s=parts.window_s,
            order=cast(QueueOrder, parts.policy),
            placement=parts.placement,
            backfill=parts.description.backfill,
            on_step=hooks.on_step,
        )
