"""The checks of a comparison's names, before anything heavy loads: every placement by
its grammar, every (placement, sharing) run's description as ``simulate`` validates it,
a policy sweep's policies, cluster and generated workload."""

from __future__ import annotations

from typing import Any

from gpumosaic.errors import InputError


def check_placements(placements: list[str]) -> None:
    """Every ``--placements`` entry by the placement grammar."""
    from gpumosaic.placement.registry import check_placement_for

    for placement in placements:
        check_placement_for(placement, field="--placements")


def check_comparison(placements: list[str], sharings: list[str], **common: Any) -> None:
    """Every (placement, sharing) run's description, validated as ``simulate`` validates
    it, and the cluster and workload they share."""
    from gpumosaic.run.description import RunDescription

    description = None
    for sharing in sharings:
        for placement in placements:
            try:
                description = RunDescription(placement=placement, sharing=sharing, **common)
            except InputError as err:
                if err.field != "--placement":
                    raise
                raise InputError(err.message, field="--placements", value=err.value) from None
    if description is not None:
        description.check_inputs()


def check_policy_sweep(
    policies: list[str], cluster: str, workload: str, placements: list[str]
) -> None:
    """A policy sweep's names: each policy, the cluster, the generated workload's kind
    (its rate is each point's), the placement."""
    from gpumosaic.run.parts import check_allocation_policy
    from gpumosaic.workloads.spec import check_cluster

    if not policies:
        raise InputError("no policies given", field="--policies")
    for name in policies:
        check_allocation_policy(name, field="--policies")
    if workload.partition(":")[0] not in ("gavel", "gavel-stream"):
        raise InputError(
            "a policy sweep needs a generated workload (gavel:... or gavel-stream:...)",
            field="--workload",
        )
    check_cluster(cluster)
    check_placements(placements)
