"""Small PolicyInput builders for table tests."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from gpumosaic.policies.base import PackedPairs, PolicyInput


def make_input(
    throughputs: Sequence[Sequence[float]],
    capacity: Sequence[float],
    *,
    scale_factors: Sequence[int] | None = None,
    demand: Sequence[float] | None = None,
    weights: Sequence[float] | None = None,
    remaining: Sequence[float] | None = None,
    arrival: Sequence[float] | None = None,
    attained: Sequence[float] | None = None,
    now: float = 0.0,
    entities: Sequence[str] = (),
    entity_weights: Sequence[tuple[str, float]] = (),
    slo: Sequence[float] | None = None,
    cost: Sequence[float] | None = None,
    gpu_types: Sequence[str] | None = None,
    pairs: Sequence[tuple[int, int]] = (),
    pair_rates: Sequence[Sequence[tuple[float, float]]] = (),
) -> PolicyInput:
    thr = np.asarray(throughputs, dtype=np.float64)
    n, t = thr.shape
    sf = np.asarray(scale_factors if scale_factors is not None else [1] * n, dtype=np.int64)
    rem = np.asarray(remaining if remaining is not None else [1000.0] * n, dtype=np.float64)
    packed = None
    if pairs:
        packed = PackedPairs(
            np.asarray(pairs, dtype=np.int64).reshape(-1, 2),
            np.asarray(pair_rates, dtype=np.float64).reshape(len(pairs), t, 2),
        )
    return PolicyInput(
        job_ids=tuple(range(n)),
        job_types=tuple(f"type{j}" for j in range(n)),
        gpu_types=tuple(gpu_types) if gpu_types is not None else ("v100", "p100", "k80")[:t],
        throughputs=thr,
        scale_factors=sf,
        demand=np.asarray(demand if demand is not None else sf, dtype=np.float64),
        capacity=np.asarray(capacity, dtype=np.float64),
        priority_weights=np.asarray(weights if weights is not None else [1.0] * n),
        remaining_steps=rem,
        total_steps=rem.copy(),
        arrival_s=np.asarray(arrival if arrival is not None else [0.0] * n, dtype=np.float64),
        attained_service_s=np.asarray(attained if attained is not None else [0.0] * n),
        now_s=now,
        entities=tuple(entities),
        entity_weights=tuple(entity_weights),
        slo_s=None if slo is None else np.asarray(slo, dtype=np.float64),
        cost_per_hour=None if cost is None else np.asarray(cost, dtype=np.float64),
        packed=packed,
    )


def job_time(alloc) -> np.ndarray:  # type: ignore[no-untyped-def]
    """Each job's total time fraction over singles and pairs."""
    time = alloc.matrix.sum(axis=1).copy()
    if alloc.pair_matrix is not None and alloc.packed is not None:
        per_pair = alloc.pair_matrix.sum(axis=1)
        np.add.at(time, alloc.packed.pairs[:, 0], per_pair)
        np.add.at(time, alloc.packed.pairs[:, 1], per_pair)
    return time


def type_use(alloc, inp: PolicyInput) -> np.ndarray:  # type: ignore[no-untyped-def]
    """GPUs of each type used (demand-weighted, pairs at their larger member's demand)."""
    use = inp.demand @ alloc.matrix
    if alloc.pair_matrix is not None and alloc.packed is not None:
        p = alloc.packed.pairs
        use = use + np.maximum(inp.demand[p[:, 0]], inp.demand[p[:, 1]]) @ alloc.pair_matrix
    return use


def assert_feasible(alloc, inp: PolicyInput, tol: float = 1e-6) -> None:  # type: ignore[no-untyped-def]
    assert alloc.matrix.shape == (inp.num_jobs, len(inp.gpu_types))
    assert (alloc.matrix >= -tol).all() and (alloc.matrix <= 1 + tol).all()
    assert (job_time(alloc) <= 1 + tol).all(), job_time(alloc)
    assert (type_use(alloc, inp) <= inp.capacity + tol).all(), (type_use(alloc, inp), inp.capacity)
    assert (alloc.matrix[inp.throughputs <= 0] <= tol).all()
    if alloc.pair_matrix is not None:
        assert (alloc.pair_matrix >= -tol).all()
