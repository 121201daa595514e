"""The round driver built on the road from names, for callers that watch every round's
plan (``bench/``: same-decision hashes, timings) rather than run a whole description:
the policy drawing from the seed's root Generator, the placement against the workload's
target, the decider's streams spawned from the same Generator, as ``run.build`` builds
``simulate --mechanism rounds``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from gpumosaic.mechanisms.rounds.decision import RoundConfig, RoundPlan
from gpumosaic.mechanisms.rounds.sim import RoundSimulator
from gpumosaic.model.cluster import ClusterSpec
from gpumosaic.placement.workload import TargetWorkload
from gpumosaic.run.parts import build_allocation_policy, build_placement_for
from gpumosaic.workloads.workload import Workload


def round_simulator(
    cluster: ClusterSpec,
    workload: Workload,
    policy: str,
    placement: str,
    seed: int,
    config: RoundConfig | None = None,
    on_plan: Callable[[RoundPlan], None] | None = None,
    **options: Any,
) -> RoundSimulator:
    rng = np.random.default_rng(seed)
    built = build_allocation_policy(policy, rng)
    target = TargetWorkload.from_jobs(workload.target_sample())
    strategy = build_placement_for(placement, target)
    return RoundSimulator(
        cluster,
        workload,
        built,
        strategy,
        config or RoundConfig(),
        on_plan=on_plan,
        rng=rng,
        target=target,
        **options,
    )
