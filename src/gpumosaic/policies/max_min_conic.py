"""The max-min LP without pairs, in Clarabel's form, from a template per problem shape.

This is the LP a round solves thousands of times (Gavel's continuous run: 2,927 solves
of ~22 job classes x 3 types). Its sparsity pattern, and every coefficient but the
demands, the rates and the capacities, depend only on the shape: the number of jobs and
types, which X[j, t] are not pinned to 0 (the job has throughput on t) and which jobs
enter the minimum (have throughput somewhere). A ``SinglesTemplate`` holds that part,
built once per shape (``singles_template``, cached), with the slots where a solve writes
its numbers; a solve then costs two fancy-index writes and Clarabel.

The problem is byte for byte what the general path hands Clarabel (``max_min_program``
over ``build_base_constraints`` through ``lp_solve.solve``: the pinned X substituted
out, bounds as rows), so Clarabel returns the same solution (tests/policies/
test_max_min_conic.py checks both).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from gpumosaic.policies.base import FloatArray
from gpumosaic.policies.lp_solve import ConicLp, CscArrays, solve_clarabel_lists

IndexArray = npt.NDArray[np.int64]


@dataclass(frozen=True, slots=True)
class SinglesTemplate:
    """The shape-only part of the max-min LP without pairs (see ``singles_template``).

    Variables: the kept X columns in flat order (j * T + t), then the level z. Rows: job
    time (n), type capacity (T), one max-min row per runnable job (z - rates . x <= 0),
    then x <= 1 and -x <= 0 per kept column.
    """

    n_jobs: int
    n_types: int
    keep: IndexArray  # kept X columns, flat j * T + t
    indptr: npt.NDArray[np.int32]
    indices: npt.NDArray[np.int32]
    data: FloatArray  # the constant coefficients; 0 in the demand and rate slots
    demand_slot: IndexArray  # where in ``data`` each kept column's demand goes
    demand_job: IndexArray  # ... and whose demand (the column's job)
    rate_slot: IndexArray  # where in ``data`` each max-min coefficient -rate goes
    rate_source: IndexArray  # ... and which flat X entry's rate
    b: FloatArray  # the constant right-hand side; 0 in the capacity slots
    # The same, as the Python lists Clarabel is handed (``lp_solve.CscArrays``).
    q_list: list[float]
    indptr_list: list[int]
    indices_list: list[int]

    def fill(
        self, rates: FloatArray, demand: FloatArray, capacity: FloatArray
    ) -> tuple[FloatArray, FloatArray]:
        """(data, b) of the problem for these (n_jobs, n_types) rates, (n_jobs,) demands
        and (n_types,) capacities."""
        data = self.data.copy()
        data[self.demand_slot] = np.asarray(demand, dtype=np.float64)[self.demand_job]
        data[self.rate_slot] = -rates.reshape(-1)[self.rate_source]
        b = self.b.copy()
        b[self.n_jobs : self.n_jobs + self.n_types] = capacity
        return data, b

    def problem(self, rates: FloatArray, demand: FloatArray, capacity: FloatArray) -> ConicLp:
        data, b = self.fill(rates, demand, capacity)
        return ConicLp(np.array(self.q_list), self.indptr, self.indices, data, b)

    def solve(self, rates: FloatArray, demand: FloatArray, capacity: FloatArray) -> FloatArray:
        """Clarabel's raw solution (kept X columns, then z) for these numbers."""
        data, b = self.fill(rates, demand, capacity)
        shape = (len(b), len(self.q_list))
        a = CscArrays(shape, self.indptr_list, self.indices_list, data.tolist())
        return solve_clarabel_lists(self.q_list, a, b.tolist())


def template_for(throughputs: FloatArray, runnable: npt.NDArray[np.bool_]) -> SinglesTemplate:
    """The (cached) template for the shape of these throughputs and runnable jobs."""
    return template_of(throughputs > 0, runnable)


def template_of(usable: npt.NDArray[np.bool_], runnable: npt.NDArray[np.bool_]) -> SinglesTemplate:
    """The (cached) template for the (n, n_types) mask of throughput > 0 and the (n,)
    mask of jobs in the minimum."""
    n, n_types = usable.shape
    return singles_template(n, n_types, usable.tobytes(), runnable.tobytes())


@functools.lru_cache(maxsize=256)
def singles_template(
    n: int, n_types: int, usable_bytes: bytes, runnable_bytes: bytes
) -> SinglesTemplate:
    """The template of one shape: ``usable_bytes`` is the (n, n_types) bool mask of
    throughput > 0, ``runnable_bytes`` the (n,) bool mask of jobs in the minimum.

    Each kept X column holds, rows ascending: its job's time row (1), its type's capacity
    row (demand), its job's max-min row (-rate; runnable jobs only), its upper-bound row
    (1) and its lower-bound row (-1); the z column holds 1 in every max-min row.
    """
    usable = np.frombuffer(usable_bytes, dtype=np.bool_)
    runnable = np.frombuffer(runnable_bytes, dtype=np.bool_)
    keep = np.flatnonzero(usable)
    k = len(keep)
    job, typ = np.divmod(keep, n_types)
    n_obj = int(runnable.sum())
    obj_row = np.cumsum(runnable) - 1  # max-min row (within the block) of each runnable job
    first_obj = n + n_types
    first_upper = first_obj + n_obj
    first_lower = first_upper + k
    ordinal = np.arange(k)
    rows = np.column_stack(
        [job, n + typ, first_obj + obj_row[job], first_upper + ordinal, first_lower + ordinal]
    )
    vals = np.column_stack([np.ones(k), np.zeros(k), np.zeros(k), np.ones(k), -np.ones(k)])
    present = np.ones((k, 5), dtype=bool)
    present[:, 2] = runnable[job]
    slot = np.full((k, 5), -1, dtype=np.int64)
    n_x = int(present.sum())
    slot[present] = np.arange(n_x)
    indptr = np.zeros(k + 2, dtype=np.int32)
    np.cumsum(present.sum(axis=1), out=indptr[1 : k + 1])
    indptr[k + 1] = indptr[k] + n_obj
    indices = np.concatenate([rows[present], first_obj + np.arange(n_obj)]).astype(np.int32)
    data = np.concatenate([vals[present], np.ones(n_obj)])
    with_rate = present[:, 2]
    q = np.zeros(k + 1)
    q[-1] = -1.0
    b = np.concatenate([np.ones(n), np.zeros(n_types), -np.zeros(n_obj), np.ones(k), -np.zeros(k)])
    for array in (keep, indptr, indices, data, b):
        array.flags.writeable = False
    return SinglesTemplate(
        n_jobs=n,
        n_types=n_types,
        keep=keep,
        indptr=indptr,
        indices=indices,
        data=data,
        demand_slot=slot[:, 1],
        demand_job=job,
        rate_slot=slot[with_rate, 2],
        rate_source=keep[with_rate],
        b=b,
        q_list=q.tolist(),
        indptr_list=indptr.tolist(),
        indices_list=indices.tolist(),
    )
