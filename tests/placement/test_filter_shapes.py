"""``feasible_shapes_among``: many job shapes against some nodes in one call, row by row
what ``feasible_among`` says for each."""

from __future__ import annotations

import numpy as np
from placement_builders import cluster, job

from gpumosaic.model.state import Assignment
from gpumosaic.placement.filter import feasible_among, feasible_shapes_among


def test_each_row_is_feasible_among_for_its_job() -> None:
    state = cluster(("V100", 2, 8000), ("T4", 1, 32000), ("V100", 4, 64000), ("A10", 1, 0))
    state.allocate(Assignment(1, 0, (0,), 700, 4000, 0))
    state.allocate(Assignment(2, 2, (1, 2), 1000, 60000, 0))
    jobs = [
        job(1, 300),
        job(1, 500, cpu=5000),
        job(2),
        job(3),
        job(1, 1000, models="T4"),
        job(1, 200, models="V100|A10"),
        job(0, cpu=4000),
        job(0, cpu=70000),
    ]
    rng = np.random.default_rng(0)
    for nodes in (np.arange(4), np.array([2, 0, 2]), rng.integers(0, 4, 9), np.zeros(0, int)):
        table = feasible_shapes_among(state, jobs, nodes)
        assert table.shape == (len(jobs), len(nodes))
        for row, j in zip(table, jobs, strict=True):
            np.testing.assert_array_equal(row, feasible_among(state, j, nodes))
    assert feasible_shapes_among(state, [], np.arange(4)).shape == (0, 4)
