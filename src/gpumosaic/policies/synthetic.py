"""Policy inputs built from Gavel's throughput table, for tests and benchmarks.

``gavel_policy_input(n_jobs, rng)`` draws job types uniformly over the table's types (and,
with ``multi_gpu``, scale factors 1/2/4/8 with Gavel's 70/10/15/5%), on a cluster of
``n_jobs / 4`` GPUs of each type unless told otherwise: the setting of Gavel's policy
solve-time measurements.
"""

from __future__ import annotations

import numpy as np

from gpumosaic.policies.base import PolicyInput
from gpumosaic.policies.packing_pairs import build_packed_pairs
from gpumosaic.workloads.throughputs import GavelThroughputTable

GAVEL_SCALE_FACTORS = (1, 2, 4, 8)
GAVEL_SCALE_FACTOR_PROBS = (0.7, 0.1, 0.15, 0.05)


def gavel_policy_input(
    n_jobs: int,
    rng: np.random.Generator,
    *,
    table: GavelThroughputTable | None = None,
    gpu_types: tuple[str, ...] = ("v100", "p100", "k80"),
    gpus_per_type: float | None = None,
    multi_gpu: bool = False,
    with_pairs: bool = False,
    top_k: int = 4,
) -> PolicyInput:
    table = table or GavelThroughputTable.load()
    keys: list[tuple[str, int]] = []
    while len(keys) < n_jobs:
        job_type = table.job_types[int(rng.integers(len(table.job_types)))]
        scale = 1
        if multi_gpu:
            scale = int(rng.choice(GAVEL_SCALE_FACTORS, p=GAVEL_SCALE_FACTOR_PROBS))
        if all(table.has(job_type, scale, g) for g in gpu_types):
            keys.append((job_type, scale))
    throughputs = np.array([[table.isolated(jt, sf, g) for g in gpu_types] for jt, sf in keys])
    scale_factors = np.array([sf for _, sf in keys], dtype=np.int64)
    total_steps = throughputs[:, 0] * 60.0 * 10.0 ** rng.uniform(1.5, 3.0, n_jobs)
    per_type = gpus_per_type if gpus_per_type is not None else max(n_jobs / 4.0, 1.0)
    packed = build_packed_pairs(keys, table, gpu_types, top_k) if with_pairs else None
    return PolicyInput(
        job_ids=tuple(range(n_jobs)),
        job_types=tuple(jt for jt, _ in keys),
        gpu_types=gpu_types,
        throughputs=throughputs,
        scale_factors=scale_factors,
        demand=scale_factors.astype(np.float64),
        capacity=np.full(len(gpu_types), float(per_type)),
        priority_weights=np.ones(n_jobs),
        remaining_steps=total_steps.copy(),
        total_steps=total_steps,
        arrival_s=np.zeros(n_jobs),
        attained_service_s=np.zeros(n_jobs),
        now_s=0.0,
        packed=packed,
    )
