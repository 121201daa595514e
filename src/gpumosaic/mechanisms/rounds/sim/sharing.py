"""Sharing models inside Gavel's round mechanism.

Gavel's rounds already share GPUs two ways: fractional jobs (milli-GPU capacity) and
``_packed`` policies (pairs at measured rates). A ``--sharing`` model adds the third: in
every round, jobs that the placement put on the same GPU run at the speeds the model
gives that company (a job on several GPUs at its slowest GPU's pace), and ``capped``
shares run at their share of the GPU. Packed pairs keep their measured pair rates.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np
import numpy.typing as npt

from gpumosaic.mechanisms.rounds.jobs import JobStore
from gpumosaic.mechanisms.rounds.leases import LeaseBook
from gpumosaic.model.state import ClusterState
from gpumosaic.sharing.speed import SpeedModel


def shared_rates(
    speed: SpeedModel,
    leases: LeaseBook,
    state: ClusterState,
    jobs: JobStore,
    rows_a: npt.NDArray[np.int64],
    rows_b: npt.NDArray[np.int64],
    alone_rates: npt.NDArray[np.float64],
    round_s: float,
) -> npt.NDArray[np.float64]:
    """This round's rate of each placed entity's first job (``alone_rates`` scaled).

    The company only holds for one round, so the model is asked about one round of work
    at most (which also keeps nvshare's quantum-by-quantum simulation short).
    """
    factors = np.ones(len(rows_a))
    singles = [int(i) for i in np.flatnonzero(rows_b < 0)]
    for i in singles:
        factors[i] = speed.solo_factor(jobs.specs[int(rows_a[i])])
    if not speed.ideal:
        on_slot: defaultdict[tuple[int, int], list[int]] = defaultdict(list)
        for i in singles:
            parts = leases.holding(int(rows_a[i]))
            if parts is None:
                continue
            for part in parts:
                for g in part.gpus:
                    on_slot[(part.node, g)].append(i)
        for (node, _), members in on_slot.items():
            if len(members) < 2:
                continue
            rows = [int(rows_a[i]) for i in members]
            left = jobs.total_steps[rows] - jobs.done_steps[rows]
            solo_left = np.minimum(left / np.maximum(alone_rates[members], 1e-12), round_s)
            company = speed.factors(
                [jobs.specs[r] for r in rows], list(solo_left), state.spec.nodes[node].gpu
            )
            for i, factor in zip(members, company.speeds, strict=True):
                factors[i] = min(factors[i], float(factor))
    return alone_rates * factors
