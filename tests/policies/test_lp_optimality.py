"""Every registered LP policy reaches the optimum of its objective, derived independently.

Each reference is built here from the policy's definition in Gavel's terms (the module
docstrings), as a dense LP for ``scipy.optimize.linprog`` (HiGHS simplex), without any of
``policies/lp_base``: max-min (max z), throughput sums, min total duration (max s with
rate_j >= rem_j s), finish-time fairness (bisection on rho, each step an LP feasibility
check), water filling (progressive filling whose bottleneck test is one exact LP per
job). Instances are small and random (seeded): 2-7 jobs, 1-3 GPU types, scale factors 1
and 2, fractional demand (0.3 and 0.5 GPU), zero rates off the v100, priority weights, part-done
jobs and candidate pairs for the ``_packed`` variants. Closed forms for one- and
two-type cases sit beside them.

Tolerances: 1e-6 relative for the LPs (Clarabel's interior point stops ~1e-8 from the
optimum); 1e-5 for finish-time fairness (ECOS); 2e-3 for water filling, whose bottleneck
test (Gavel's) counts a job as improvable only if it can gain slack - 1 = 1e-4 of its
level, so levels can settle that far below the exact leximin, round after round.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest
from policy_builders import assert_feasible, make_input
from scipy.optimize import linprog

from gpumosaic.policies.base import Allocation, PolicyInput
from gpumosaic.policies.registry import build_policy

COST = {"v100": 2.48, "p100": 1.46, "k80": 0.45}


def random_instance(seed: int, with_pairs: bool = False) -> PolicyInput:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 8))
    types = ("v100", "p100", "k80")[: int(rng.integers(1, 4))]
    t = len(types)
    thr = rng.uniform(0.5, 4.0, size=(n, t)).round(2)
    # Zero rates, except on the v100 (column 0): Gavel measures every job there, and the
    # agnostic variants run every job at its v100 rate.
    thr[:, 1:][rng.random((n, t - 1)) < 0.25] = 0.0
    sf = rng.choice([1, 1, 2], size=n)
    demand = np.where(sf == 1, rng.choice([0.3, 0.5, 1.0], size=n), sf).astype(float)
    total = rng.uniform(1e3, 1e4, size=n).round()
    remaining = (total * rng.uniform(0.2, 1.0, size=n)).round()
    pairs: list[tuple[int, int]] = []
    pair_rates: list[list[tuple[float, float]]] = []
    if with_pairs:
        for a in range(n):
            for b in range(a + 1, n):
                if sf[a] == sf[b] and rng.random() < 0.5:
                    pairs.append((a, b))
                    frac = rng.uniform(0.4, 0.8, size=(t, 2))
                    pair_rates.append(
                        [(thr[a, k] * frac[k, 0], thr[b, k] * frac[k, 1]) for k in range(t)]
                    )
    inp = make_input(
        thr,
        rng.integers(1, 4, size=t).astype(float),
        scale_factors=sf,
        demand=demand,
        weights=rng.choice([1.0, 2.0, 3.0], size=n),
        remaining=remaining,
        arrival=-rng.uniform(0, 5000, size=n).round(),
        slo=np.where(rng.random(n) < 0.5, rng.uniform(2e3, 2e4, size=n), np.nan),
        cost=[COST[g] for g in types],
        gpu_types=types,
        pairs=pairs,
        pair_rates=pair_rates,
    )
    # Part-done jobs: total steps above what remains.
    from dataclasses import replace

    return replace(inp, total_steps=total)


@dataclass(frozen=True)
class Model:
    """Dense LP pieces over v = (X row-major, Y row-major): rates and base constraints."""

    rates: np.ndarray  # (n, num_vars): rate_j = rates[j] @ v for the given throughputs
    a_ub: np.ndarray
    b_ub: np.ndarray
    bounds: list[tuple[float, float]]


def model(inp: PolicyInput, thr: np.ndarray, pair_scale: np.ndarray | None = None) -> Model:
    """Gavel's base constraints with demand: time <= 1 per job, demand-weighted use <=
    capacity per type (a pair at its larger member's demand), X = 0 without a rate, a
    pair only with both rates > 0 and equal scale factors. ``pair_scale`` multiplies each
    job's pair rates (the _perf normalization); pairs are left out when it is None."""
    n, t = thr.shape
    pairs = [] if pair_scale is None or inp.packed is None else inp.packed.pairs.tolist()
    nv = n * t + len(pairs) * t
    rates = np.zeros((n, nv))
    a_ub = np.zeros((n + t, nv))
    bounds = []
    for j in range(n):
        for k in range(t):
            col = j * t + k
            rates[j, col] = thr[j, k]
            a_ub[j, col] = 1.0
            a_ub[n + k, col] = inp.demand[j]
            bounds.append((0.0, 1.0 if inp.throughputs[j, k] > 0 else 0.0))
    for p, (a, b) in enumerate(pairs):
        assert inp.packed is not None and pair_scale is not None
        for k in range(t):
            col = n * t + p * t + k
            ra, rb = inp.packed.throughputs[p, k]
            usable = ra > 0 and rb > 0 and inp.scale_factors[a] == inp.scale_factors[b]
            rates[a, col] = ra * pair_scale[a]
            rates[b, col] = rb * pair_scale[b]
            a_ub[a, col] = a_ub[b, col] = 1.0
            a_ub[n + k, col] = max(inp.demand[a], inp.demand[b])
            bounds.append((0.0, 1.0 if usable else 0.0))
    b_ub = np.concatenate([np.ones(n), inp.capacity])
    return Model(rates, a_ub, b_ub, bounds)


def solution_vector(alloc: Allocation, inp: PolicyInput, with_pairs: bool) -> np.ndarray:
    parts = [alloc.matrix.reshape(-1)]
    if with_pairs and inp.packed is not None:
        assert alloc.pair_matrix is not None
        parts.append(alloc.pair_matrix.reshape(-1))
    return np.concatenate(parts)


def max_z(m: Model, coef: np.ndarray, rows: np.ndarray, extra: list | None = None) -> float:
    """max z s.t. coef_j * rate_j >= z for j in rows, base constraints (+ extra rows)."""
    nv = m.rates.shape[1]
    c = np.zeros(nv + 1)
    c[-1] = -1.0
    a = [np.hstack([m.a_ub, np.zeros((len(m.b_ub), 1))])]
    b = [m.b_ub]
    a.append(np.hstack([-(coef[rows, None] * m.rates[rows]), np.ones((len(rows), 1))]))
    b.append(np.zeros(len(rows)))
    for row, rhs in extra or []:
        a.append(np.append(row, 0.0)[None, :])
        b.append(np.array([rhs]))
    res = linprog(c, A_ub=np.vstack(a), b_ub=np.concatenate(b), bounds=[*m.bounds, (None, None)])
    assert res.status == 0, res.message
    return float(-res.fun)


def prop_rates(inp: PolicyInput, thr: np.ndarray) -> np.ndarray:
    """Gavel's ProportionalPolicy throughput: every type at capacity_t / sum(capacity)."""
    return np.asarray(thr @ (inp.capacity / inp.capacity.sum()))


def usable(inp: PolicyInput) -> np.ndarray:
    return (inp.throughputs > 0).astype(float)


def reference_rates(inp: PolicyInput) -> np.ndarray:
    """The agnostic rate: the job's v100 rate on every type it can use."""
    return np.where(inp.throughputs > 0, inp.throughputs[:, [0]], 0.0)


INSTANCES = [random_instance(s) for s in range(6)]
PACKED = [random_instance(s, with_pairs=True) for s in range(3)]


# ---- max-min fairness -------------------------------------------------------------------


@pytest.mark.parametrize("name", ["max_min_fairness", "max_min_fairness_perf"])
@pytest.mark.parametrize("inp", INSTANCES)
def test_max_min_fairness_reaches_the_lp_optimum(name: str, inp: PolicyInput) -> None:
    agnostic = name == "max_min_fairness"
    thr = usable(inp) if agnostic else inp.throughputs
    prop = np.ones(inp.num_jobs) if agnostic else prop_rates(inp, thr)
    coef = inp.scale_factors / inp.priority_weights / prop
    m = model(inp, thr)
    alloc = build_policy(name).allocate(inp)
    assert_feasible(alloc, inp)
    got = float(np.min(coef * (m.rates @ solution_vector(alloc, inp, False))))
    assert got == pytest.approx(max_z(m, coef, np.arange(inp.num_jobs)), rel=1e-6)


@pytest.mark.parametrize("inp", PACKED)
def test_max_min_fairness_packed_reaches_the_lp_optimum(inp: PolicyInput) -> None:
    prop = prop_rates(inp, inp.throughputs)
    coef = inp.scale_factors / inp.priority_weights / prop
    # Pair rates enter with the job's own _perf normalization (the module docstring).
    m = model(inp, inp.throughputs, pair_scale=np.ones(inp.num_jobs))
    alloc = build_policy("max_min_fairness_packed").allocate(inp)
    assert_feasible(alloc, inp)
    got = float(np.min(coef * (m.rates @ solution_vector(alloc, inp, True))))
    assert got == pytest.approx(max_z(m, coef, np.arange(inp.num_jobs)), rel=1e-6)


def test_max_min_fairness_closed_form_one_type_fractional() -> None:
    # One type, 2 GPUs; jobs of demand 0.5, 1 and 2 (sf 1, 1, 2), weights 1: every job
    # gets the same sf * time share z: 0.5 z + 1 z + 2 (z / 2) = 2, so z = 2 / 2.5 = 0.8.
    inp = make_input([[1.0], [3.0], [2.0]], [2.0], scale_factors=[1, 1, 2], demand=[0.5, 1.0, 2.0])
    alloc = build_policy("max_min_fairness").allocate(inp)
    assert alloc.matrix[:, 0] == pytest.approx([0.8, 0.8, 0.4], abs=1e-6)
    # _perf on one type: prop_j = thr_j, so the normalized rate is the time share again.
    assert build_policy("max_min_fairness_perf").allocate(inp).matrix[:, 0] == pytest.approx(
        [0.8, 0.8, 0.4], abs=1e-6
    )


def test_max_min_fairness_perf_closed_form_two_types() -> None:
    # Types a, b with 1 GPU each; job 0 rates (2, 1), job 1 rates (1, 2). prop = 1.5 each.
    # Each job on its fast type: normalized rate 2 / 1.5 = 4/3 for both, the optimum
    # (the two jobs' normalized rates sum to at most 8/3 over any allocation).
    inp = make_input([[2.0, 1.0], [1.0, 2.0]], [1.0, 1.0], gpu_types=("a", "b"))
    alloc = build_policy("max_min_fairness_perf").allocate(inp)
    assert alloc.objective == pytest.approx(4 / 3, rel=1e-6)


# ---- throughput sums and min total duration ---------------------------------------------


def max_sum(m: Model, objective: np.ndarray, extra: list | None = None) -> float:
    """max objective @ v (one coefficient per variable) s.t. base (+ extra rows)."""
    c = -objective
    a, b = [m.a_ub], [m.b_ub]
    for row, rhs in extra or []:
        a.append(row[None, :])
        b.append(np.array([rhs]))
    res = linprog(c, A_ub=np.vstack(a), b_ub=np.concatenate(b), bounds=m.bounds)
    assert res.status == 0, res.message
    return float(-res.fun)


@pytest.mark.parametrize(
    "name",
    [
        "max_sum_throughput_perf",
        "max_sum_throughput_normalized_by_cost_perf",
        "max_sum_throughput_normalized_by_cost_perf_SLOs",
        "max_sum_throughput_normalized_by_cost_packed_SLOs",
    ],
)
@pytest.mark.parametrize("inp", INSTANCES[:4] + PACKED)
def test_max_sum_throughput_reaches_the_lp_optimum(name: str, inp: PolicyInput) -> None:
    packed = "packed" in name
    m = model(inp, inp.throughputs, pair_scale=np.ones(inp.num_jobs) if packed else None)
    t = len(inp.gpu_types)
    if "cost" in name:
        per_col = np.tile(1.0 / np.array([COST[g] for g in inp.gpu_types]), m.rates.shape[1] // t)
        objective = m.rates.sum(axis=0) * per_col
    else:
        objective = m.rates.sum(axis=0)
    extra = []
    if "SLOs" in name:
        assert inp.slo_s is not None
        left = inp.arrival_s + inp.slo_s - inp.now_s
        for j in np.flatnonzero(np.isfinite(inp.slo_s) & (left > 0)):
            extra.append((-m.rates[j], -inp.remaining_steps[j] / left[j]))
        probe = linprog(
            -objective,
            A_ub=np.vstack([m.a_ub] + [r[None, :] for r, _ in extra]),
            b_ub=np.concatenate([m.b_ub, [rhs for _, rhs in extra]]),
            bounds=m.bounds,
        )
        if probe.status == 2:  # SLOs cannot all be met: Gavel drops them
            extra = []
    alloc = build_policy(name).allocate(inp)
    assert_feasible(alloc, inp)
    got = float(objective @ solution_vector(alloc, inp, packed))
    assert got == pytest.approx(max_sum(m, objective, extra), rel=1e-6)


@pytest.mark.parametrize("name", ["min_total_duration", "min_total_duration_perf"])
@pytest.mark.parametrize("inp", INSTANCES)
def test_min_total_duration_reaches_the_lp_optimum(name: str, inp: PolicyInput) -> None:
    thr = reference_rates(inp) if name == "min_total_duration" else inp.throughputs
    m = model(inp, thr)
    # max s with rate_j >= rem_j * s, i.e. max min_j rate_j / rem_j; T = 1 / s.
    best_s = max_z(m, 1.0 / inp.remaining_steps, np.arange(inp.num_jobs))
    alloc = build_policy(name).allocate(inp)
    assert_feasible(alloc, inp)
    rate = m.rates @ solution_vector(alloc, inp, False)
    assert float(np.max(inp.remaining_steps / rate)) == pytest.approx(1.0 / best_s, rel=1e-6)


@pytest.mark.parametrize("inp", PACKED)
def test_min_total_duration_packed_reaches_the_lp_optimum(inp: PolicyInput) -> None:
    m = model(inp, inp.throughputs, pair_scale=np.ones(inp.num_jobs))
    best_s = max_z(m, 1.0 / inp.remaining_steps, np.arange(inp.num_jobs))
    alloc = build_policy("min_total_duration_packed").allocate(inp)
    rate = m.rates @ solution_vector(alloc, inp, True)
    assert float(np.max(inp.remaining_steps / rate)) == pytest.approx(1.0 / best_s, rel=1e-6)


# ---- finish-time fairness ---------------------------------------------------------------


def isolated_rates(inp: PolicyInput, thr: np.ndarray) -> np.ndarray:
    """Gavel's IsolatedPolicy: capacity_t / (m * demand_j), each row scaled to <= 1."""
    share = inp.capacity[None, :] / inp.num_jobs / inp.demand[:, None]
    share = share / np.maximum(share.sum(axis=1), 1.0)[:, None]
    return np.asarray((thr * share).sum(axis=1))


def ftf_terms(inp: PolicyInput, thr: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(elapsed t_j, isolated finish time ref_j, active mask) for a policy's first call:
    work done so far counts as done_j / iso_j seconds of isolated time."""
    iso = isolated_rates(inp, thr)
    done = inp.total_steps - inp.remaining_steps
    active = (inp.remaining_steps > 0) & (iso > 0)
    safe = np.where(iso > 0, iso, 1.0)
    return inp.now_s - inp.arrival_s, (done + inp.remaining_steps) / safe, active


def min_max_rho(m: Model, inp: PolicyInput, t: np.ndarray, ref: np.ndarray, act) -> float:
    """Bisection on rho: feasible iff some X gives rate_j >= rem_j / (rho ref_j - t_j)."""

    def feasible(rho: float) -> bool:
        slack = rho * ref - t
        if (slack[act] <= 0).any():
            return False
        rows = np.flatnonzero(act)
        a = np.vstack([m.a_ub, -m.rates[rows]])
        b = np.concatenate([m.b_ub, -inp.remaining_steps[rows] / slack[rows]])
        return bool(
            linprog(np.zeros(m.rates.shape[1]), A_ub=a, b_ub=b, bounds=m.bounds).status == 0
        )

    lo, hi = 0.0, 1.0
    while not feasible(hi):
        lo, hi = hi, hi * 2
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if feasible(mid) else (mid, hi)
    return hi


@pytest.mark.parametrize("name", ["finish_time_fairness", "finish_time_fairness_perf"])
@pytest.mark.parametrize("inp", INSTANCES)
def test_finish_time_fairness_reaches_the_optimum(name: str, inp: PolicyInput) -> None:
    thr = reference_rates(inp) if name == "finish_time_fairness" else inp.throughputs
    m = model(inp, thr)
    t, ref, act = ftf_terms(inp, thr)
    alloc = build_policy(name).allocate(inp)
    assert_feasible(alloc, inp)
    rate = m.rates @ solution_vector(alloc, inp, False)
    rho = (t + inp.remaining_steps / rate) / ref
    assert float(np.max(rho[act])) == pytest.approx(min_max_rho(m, inp, t, ref, act), rel=1e-5)
    assert alloc.objective == pytest.approx(float(np.max(rho[act])), rel=1e-5)


@pytest.mark.parametrize("inp", PACKED)
def test_finish_time_fairness_packed_reaches_the_optimum(inp: PolicyInput) -> None:
    m = model(inp, inp.throughputs, pair_scale=np.ones(inp.num_jobs))
    t, ref, act = ftf_terms(inp, inp.throughputs)
    alloc = build_policy("finish_time_fairness_packed").allocate(inp)
    rate = m.rates @ solution_vector(alloc, inp, True)
    rho = (t + inp.remaining_steps / rate) / ref
    assert float(np.max(rho[act])) == pytest.approx(min_max_rho(m, inp, t, ref, act), rel=1e-5)


# ---- water filling ----------------------------------------------------------------------


def normalized_model(
    inp: PolicyInput, thr: np.ndarray, prop: np.ndarray, pairs: bool
) -> tuple[Model, np.ndarray]:
    """The base model and the rows n_j = rate_j / prop_j (pair rates divided the same)."""
    m = model(inp, thr, pair_scale=1.0 / prop if pairs else None)
    norm = m.rates.copy()
    norm[:, : inp.num_jobs * len(inp.gpu_types)] /= prop[:, None]
    return m, norm


def leximin(inp: PolicyInput, thr: np.ndarray, prop: np.ndarray, pairs: bool) -> np.ndarray:
    """Exact progressive filling of n_j with weights sf_j / w_j: raise the unfrozen jobs
    together (one LP), then freeze every job that one LP per job (max n_j with everybody
    at or above their level) cannot lift by more than 1e-7 of its level. The leximin
    vector is unique, so it can be compared job by job."""
    n = inp.num_jobs
    m, norm = normalized_model(inp, thr, prop, pairs)
    mult = inp.scale_factors / inp.priority_weights
    level = np.zeros(n)
    frozen = ~(norm > 0).any(axis=1)
    while not frozen.all():
        rows = np.flatnonzero(~frozen)
        level[rows] += _raise_level(m, norm, mult, level, frozen) / mult[rows]
        newly = []
        for j in rows:
            res = linprog(
                -norm[j],
                A_ub=np.vstack([m.a_ub, -norm]),
                b_ub=np.concatenate([m.b_ub, -level * (1 - 1e-9)]),
                bounds=m.bounds,
            )
            assert res.status == 0, res.message
            if -res.fun <= level[j] * (1 + 1e-7):
                newly.append(j)
        assert newly, "an LP round must leave a bottleneck"
        frozen[newly] = True
    return level


def _raise_level(m: Model, norm: np.ndarray, mult: np.ndarray, level, frozen) -> float:
    """max c s.t. mult_j (n_j - level_j) >= c for unfrozen j, n_j >= level_j for all j."""
    nv = norm.shape[1]
    rows = np.flatnonzero(~frozen)
    a = np.vstack(
        [
            np.hstack([m.a_ub, np.zeros((len(m.b_ub), 1))]),
            np.hstack([-(mult[rows, None] * norm[rows]), np.ones((len(rows), 1))]),
            np.hstack([-norm, np.zeros((len(norm), 1))]),
        ]
    )
    b = np.concatenate([m.b_ub, -mult[rows] * level[rows], -level * (1 - 1e-9)])
    c = np.zeros(nv + 1)
    c[-1] = -1.0
    res = linprog(c, A_ub=a, b_ub=b, bounds=[*m.bounds, (None, None)])
    assert res.status == 0, res.message
    return float(-res.fun)


@pytest.mark.parametrize(
    "name", ["max_min_fairness_water_filling", "max_min_fairness_water_filling_perf"]
)
@pytest.mark.parametrize("inp", INSTANCES)
def test_water_filling_reaches_the_leximin(name: str, inp: PolicyInput) -> None:
    agnostic = name == "max_min_fairness_water_filling"
    thr = usable(inp) if agnostic else inp.throughputs
    prop = np.ones(inp.num_jobs) if agnostic else prop_rates(inp, thr)
    alloc = build_policy(name).allocate(inp)
    assert_feasible(alloc, inp)
    assert not alloc.fallbacks
    got = (thr * alloc.matrix).sum(axis=1) / prop
    want = leximin(inp, thr, prop, pairs=False)
    # Job by job, not only sorted: every job reaches its own level of the leximin vector.
    assert got == pytest.approx(want, rel=2e-3)


@pytest.mark.parametrize("inp", PACKED)
def test_water_filling_packed_reaches_the_leximin(inp: PolicyInput) -> None:
    prop = prop_rates(inp, inp.throughputs)
    alloc = build_policy("max_min_fairness_water_filling_packed").allocate(inp)
    assert_feasible(alloc, inp)
    assert not alloc.fallbacks
    _, norm = normalized_model(inp, inp.throughputs, prop, pairs=True)
    got = norm @ solution_vector(alloc, inp, True)
    assert got == pytest.approx(leximin(inp, inp.throughputs, prop, pairs=True), rel=2e-3)
