"""Solve a linear program given as sparse matrices, with one of three back ends.

Policies build their LP as index arrays and sparse matrices (``LinearProgram``), not as
cvxpy expressions, and hand it to the solver directly. Measured on the 2-core dev
machine (Gavel inputs, N/4 GPUs per type): cvxpy adds ~8 ms per call (its problem
compilation) and ~50% at 1,024 jobs with pairs (0.55 s direct vs 0.83 s through cvxpy),
which matters when a simulation solves thousands of times.

Back ends (the ``backend`` option of every LP policy):

- ``"clarabel"`` (default): interior point, like the ECOS solver Gavel uses, so a max-min
  LP with many optimal allocations returns a central one rather than a vertex that
  starves the jobs the objective does not bind. At the sizes a round sees (Gavel's
  36:36:36 run: ~25 job classes x 3 types) one Clarabel solve is ~0.5 ms on the dev
  machine, HiGHS ~0.7 ms through highspy and ~1.8 ms through ``scipy.optimize.linprog``
  (setup dominates), and HiGHS's vertex changes the rounds' decisions; so Clarabel stays
  the default, and the hot LP (max-min without pairs) is built in Clarabel's form
  directly, from a template per problem shape (``max_min_conic``), and handed over as
  Python lists (``CscArrays``, ``solve_clarabel_lists``);
- ``"highs"``: HiGHS dual simplex through scipy (a vertex solution); also the only back
  end for mixed-integer programs (water filling's bottleneck detection);
- ``"cvxpy"`` or ``"cvxpy:<SOLVER>"``: the same LP through cvxpy, for cross-checks.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from gpumosaic.policies.base import FloatArray

if TYPE_CHECKING:
    import scipy.sparse as sp

BACKENDS = ("clarabel", "highs", "cvxpy")


class PolicySolveError(RuntimeError):
    """A policy's optimization problem could not be solved (infeasible, or solver failure)."""


@dataclass(frozen=True, slots=True)
class LinearProgram:
    """minimize c @ v  s.t.  a_ub @ v <= b_ub,  a_eq @ v == b_eq,  lower <= v <= upper.

    ``integer`` marks variables that must be integral (only the ``highs`` back end).
    """

    c: FloatArray
    a_ub: sp.sparray  # any scipy sparse array (COO is cheapest to build)
    b_ub: FloatArray
    lower: FloatArray
    upper: FloatArray
    a_eq: sp.sparray | None = None
    b_eq: FloatArray | None = None
    integer: npt.NDArray[np.bool_] | None = None

    @property
    def num_vars(self) -> int:
        return int(self.c.shape[0])


@dataclass(frozen=True, slots=True)
class LpSolution:
    values: FloatArray
    objective: float
    backend: str


def coo(
    rows: npt.ArrayLike, cols: npt.ArrayLike, vals: npt.ArrayLike, shape: tuple[int, int]
) -> sp.coo_array:
    """A COO matrix from triplets (duplicates add up)."""
    import scipy.sparse as sp

    return sp.coo_array(
        (np.asarray(vals, dtype=np.float64), (np.asarray(rows), np.asarray(cols))), shape=shape
    )


def stack_rows(blocks: list[sp.coo_array], n_cols: int) -> sp.coo_array:
    """Stack COO blocks vertically by concatenating triplets (scipy's vstack is slow)."""
    offsets = np.cumsum([0] + [b.shape[0] for b in blocks])
    return coo(
        np.concatenate([b.row + off for b, off in zip(blocks, offsets, strict=False)]),
        np.concatenate([b.col for b in blocks]),
        np.concatenate([b.data for b in blocks]),
        (int(offsets[-1]), n_cols),
    )


def _keep_columns(a: sp.sparray, keep: npt.NDArray[np.int64], n_cols: int) -> sp.coo_array:
    import scipy.sparse as sp

    m = sp.coo_array(a)
    remap = np.full(n_cols, -1, dtype=np.int64)
    remap[keep] = np.arange(len(keep))
    new_col = remap[m.col]
    mask = new_col >= 0
    return coo(m.row[mask], new_col[mask], m.data[mask], (m.shape[0], len(keep)))


def solve(lp: LinearProgram, backend: str = "clarabel") -> LpSolution:
    """Solve ``lp``; raise PolicySolveError naming the back end and status on failure."""
    fixed = lp.lower == lp.upper
    if fixed.all():
        values = lp.lower.copy()
        return LpSolution(values, float(lp.c @ values), backend)
    # Variables pinned by their bounds (e.g. X[j, t] = 0 where job j cannot run on type t)
    # are substituted out so the solver sees a smaller problem.
    keep = np.flatnonzero(~fixed)
    fixed_values = np.where(fixed, lp.lower, 0.0)
    n = lp.num_vars
    shift_ub = lp.a_ub @ fixed_values if fixed_values.any() else 0.0
    reduced = LinearProgram(
        c=lp.c[keep],
        a_ub=_keep_columns(lp.a_ub, keep, n),
        b_ub=lp.b_ub - shift_ub,
        lower=lp.lower[keep],
        upper=lp.upper[keep],
        a_eq=None if lp.a_eq is None else _keep_columns(lp.a_eq, keep, n),
        b_eq=None if lp.a_eq is None or lp.b_eq is None else lp.b_eq - lp.a_eq @ fixed_values,
        integer=None if lp.integer is None else lp.integer[keep],
    )
    if reduced.integer is not None and reduced.integer.any():
        sub = _solve_highs(reduced)
    elif backend == "clarabel":
        sub = _solve_clarabel(reduced)
    elif backend == "highs":
        sub = _solve_highs(reduced)
    elif backend == "cvxpy" or backend.startswith("cvxpy:"):
        sub = _solve_cvxpy(reduced, backend.partition(":")[2] or "CLARABEL")
    else:
        raise ValueError(f"unknown LP backend {backend!r} (known: {', '.join(BACKENDS)})")
    values = fixed_values.copy()
    values[keep] = sub
    return LpSolution(values, float(lp.c @ values), backend)


def _solve_highs(lp: LinearProgram) -> FloatArray:
    # scipy.optimize takes ~0.2 s to import; the default back end does not need it.
    from scipy.optimize import Bounds, LinearConstraint, linprog, milp

    if lp.integer is not None and lp.integer.any():
        constraints = [LinearConstraint(lp.a_ub, -np.inf, lp.b_ub)]
        if lp.a_eq is not None and lp.b_eq is not None:
            constraints.append(LinearConstraint(lp.a_eq, lp.b_eq, lp.b_eq))
        result = milp(
            lp.c,
            constraints=constraints,
            integrality=lp.integer.astype(np.int64),
            bounds=Bounds(lp.lower, lp.upper),
        )
        if result.status != 0 or result.x is None:
            raise PolicySolveError(f"HiGHS MILP failed: status {result.status} ({result.message})")
        return np.asarray(result.x, dtype=np.float64)
    result = linprog(
        lp.c,
        A_ub=lp.a_ub,
        b_ub=lp.b_ub,
        A_eq=lp.a_eq,
        b_eq=lp.b_eq,
        bounds=np.column_stack([lp.lower, lp.upper]),
        method="highs",
    )
    if result.status != 0 or result.x is None:
        raise PolicySolveError(f"HiGHS LP failed: status {result.status} ({result.message})")
    return np.asarray(result.x, dtype=np.float64)


@dataclass(frozen=True, slots=True)
class ConicLp:
    """An LP in Clarabel's form: minimize q @ v  s.t.  a @ v + s = b, s in
    {0}^m_eq x R+^(m - m_eq); ``a`` in canonical CSC (column-major, rows ascending within a
    column, no duplicates) as three arrays. Finite variable bounds are rows of ``a``.

    ``clarabel_form`` turns any ``LinearProgram`` into one; a policy on a hot path may
    build its problem directly from index arrays (``max_min_conic.SinglesTemplate``),
    which is cheaper than scipy's constructors by an order of magnitude at the sizes a
    round sees and gives Clarabel the same input, so the same solution.
    """

    q: FloatArray
    indptr: npt.NDArray[np.int32]
    indices: npt.NDArray[np.int32]
    data: FloatArray
    b: FloatArray
    m_eq: int = 0

    @property
    def shape(self) -> tuple[int, int]:
        return (int(self.b.shape[0]), int(self.q.shape[0]))


def clarabel_form(lp: LinearProgram) -> ConicLp:
    """``lp`` with its bounds as rows: [a_eq; a_ub; I (finite uppers); -I (finite lowers)]."""
    import scipy.sparse as sp

    n = lp.num_vars
    upper_idx = np.flatnonzero(np.isfinite(lp.upper))
    lower_idx = np.flatnonzero(np.isfinite(lp.lower))
    blocks: list[sp.coo_array] = []
    rhs: list[FloatArray] = []
    m_eq = 0
    if lp.a_eq is not None and lp.b_eq is not None:
        blocks.append(sp.coo_array(lp.a_eq))
        rhs.append(lp.b_eq)
        m_eq = lp.a_eq.shape[0]
    blocks += [
        sp.coo_array(lp.a_ub),
        coo(np.arange(len(upper_idx)), upper_idx, np.ones(len(upper_idx)), (len(upper_idx), n)),
        coo(np.arange(len(lower_idx)), lower_idx, -np.ones(len(lower_idx)), (len(lower_idx), n)),
    ]
    rhs += [lp.b_ub, lp.upper[upper_idx], -lp.lower[lower_idx]]
    a = sp.csc_matrix(stack_rows(blocks, n).tocsc())
    a.sort_indices()
    return ConicLp(
        np.asarray(lp.c, dtype=np.float64),
        a.indptr.astype(np.int32),
        a.indices.astype(np.int32),
        np.asarray(a.data, dtype=np.float64),
        np.concatenate(rhs),
        m_eq,
    )


@dataclass(frozen=True, slots=True)
class CscArrays:
    """A CSC matrix as the attributes Clarabel's Python binding reads of one (``shape``,
    ``indptr``, ``indices``, ``data``, ``has_canonical_format``; clarabel's
    ``cscmatrix_py.rs``), without scipy's constructor and its format checks (~40 us a
    matrix, more than building the LP). The arrays must be canonical CSC. Python lists
    convert fastest: the binding copies every element into a Rust vector, and a list
    hands over Python floats where an array creates a NumPy scalar per element.
    """

    shape: tuple[int, int]
    indptr: Sequence[int]
    indices: Sequence[int]
    data: Sequence[float]
    has_canonical_format: bool = True


@functools.cache
def _clarabel_settings() -> Any:
    """Clarabel's default settings, quiet: made once (the solver copies what it reads)."""
    import clarabel

    settings = clarabel.DefaultSettings()
    settings.verbose = False
    return settings


def solve_clarabel_lists(
    q: Sequence[float], a: CscArrays, b: Sequence[float], m_eq: int = 0
) -> FloatArray:
    """Clarabel's solution of min q @ v s.t. a @ v + s = b, s in {0}^m_eq x R+^rest, with
    every input as Python lists (the cheapest form to hand over; see ``CscArrays``)."""
    import clarabel

    m, n = a.shape
    p = CscArrays((n, n), [0] * (n + 1), [], [])
    cones = []
    if m_eq:
        cones.append(clarabel.ZeroConeT(m_eq))
    cones.append(clarabel.NonnegativeConeT(m - m_eq))
    solution = clarabel.DefaultSolver(p, q, a, b, cones, _clarabel_settings()).solve()
    status = str(solution.status)
    if status not in ("Solved", "AlmostSolved"):
        raise PolicySolveError(f"Clarabel LP failed: status {status}")
    return np.array(solution.x, dtype=np.float64)


def solve_conic(problem: ConicLp) -> FloatArray:
    """Clarabel's solution of ``problem`` (raw: a hair outside the bounds is possible)."""
    a = CscArrays(
        problem.shape,
        problem.indptr.tolist(),
        problem.indices.tolist(),
        problem.data.tolist(),
    )
    return solve_clarabel_lists(problem.q.tolist(), a, problem.b.tolist(), problem.m_eq)


def _solve_clarabel(lp: LinearProgram) -> FloatArray:
    # Interior-point iterates sit a hair outside the bounds; clip to them.
    return np.clip(solve_conic(clarabel_form(lp)), lp.lower, lp.upper)


def _solve_cvxpy(lp: LinearProgram, solver: str) -> FloatArray:
    import cvxpy as cp

    v = cp.Variable(lp.num_vars)
    constraints = [lp.a_ub @ v <= lp.b_ub]
    if lp.a_eq is not None and lp.b_eq is not None:
        constraints.append(lp.a_eq @ v == lp.b_eq)
    finite_lo = np.isfinite(lp.lower)
    finite_hi = np.isfinite(lp.upper)
    if finite_lo.any():
        constraints.append(v[finite_lo] >= lp.lower[finite_lo])
    if finite_hi.any():
        constraints.append(v[finite_hi] <= lp.upper[finite_hi])
    problem = cp.Problem(cp.Minimize(lp.c @ v), constraints)
    try:
        problem.solve(solver=solver)
    except cp.error.SolverError as err:
        raise PolicySolveError(f"cvxpy/{solver} failed: {err}") from None
    if problem.status not in (cp.OPTIMAL, cp.OPTIMAL_INACCURATE) or v.value is None:
        raise PolicySolveError(f"cvxpy/{solver} failed: status {problem.status}")
    return np.clip(np.asarray(v.value, dtype=np.float64), lp.lower, lp.upper)
