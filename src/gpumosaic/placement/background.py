"""Background load: a cluster pre-filled with tasks that never leave, so that an
operator's own job list meets realistic contention (``--background openb:default``).

The tasks are placed once, before the first job arrives, in a seeded random order by the
run's own placement strategy (the one the jobs will meet), until the allocated GPU milli
reaches ``fraction`` of the cluster's capacity. Tasks that find no place are skipped and
counted; the fill stops when the target is reached or a whole pass over the task list
placed nothing more. The pre-filled state is the simulator's starting state: background
tasks hold their shares for the whole run and are not jobs of the run.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from gpumosaic.model.job import JobSpec
from gpumosaic.model.state import ClusterState
from gpumosaic.placement.base import PlacementStrategy

# --background's grammar is plain Python (a description is checked with it, no numpy).
from gpumosaic.workloads.background import DEFAULT_FRACTION as DEFAULT_FRACTION
from gpumosaic.workloads.background import BackgroundOptions as BackgroundOptions
from gpumosaic.workloads.background import BackgroundSpec as BackgroundSpec


@dataclass(frozen=True, slots=True)
class BackgroundLoad:
    source: str
    placed: int  # tasks holding resources
    skipped: int  # tasks that found no place when their turn came
    allocated_milli: int
    capacity_milli: int
    target_fraction: float

    @property
    def fraction(self) -> float:
        return self.allocated_milli / self.capacity_milli if self.capacity_milli else 0.0

    def line(self) -> str:
        return (
            f"background: {self.placed:,} tasks of {self.source} hold {self.fraction:.1%} of "
            f"GPU capacity (target {self.target_fraction:.0%}; {self.skipped:,} found no place)"
        )


def prefill(
    state: ClusterState,
    tasks: Sequence[JobSpec],
    strategy: PlacementStrategy,
    fraction: float,
    rng: np.random.Generator,
    source: str = "background",
) -> BackgroundLoad:
    """Place ``tasks`` (sampled with repetition, seeded order) into ``state`` until
    ``fraction`` of its GPU milli is allocated (see the module doc)."""
    capacity = state.total_gpu_milli
    target = fraction * capacity
    allocated = placed = skipped = 0
    gpu_tasks = [t for t in tasks if t.total_gpu_milli > 0]
    while gpu_tasks and allocated < target:
        placed_this_pass = 0
        for index in rng.permutation(len(gpu_tasks)):
            if allocated >= target:
                break
            # Negative ids: background tasks never collide with the run's job ids.
            task = replace(gpu_tasks[index], id=-(placed + skipped + 1))
            assignment = strategy.place(state, task, rng)
            if assignment is None:
                skipped += 1
                continue
            state.allocate(assignment)
            allocated += assignment.gpu_milli * len(assignment.gpus)
            placed += 1
            placed_this_pass += 1
        if placed_this_pass == 0:
            break  # nothing more fits: the cluster is as full as these tasks can make it
    return BackgroundLoad(source, placed, skipped, allocated, capacity, fraction)
