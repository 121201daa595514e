"""The report's arithmetic: intervals over seeds and the occupancy mosaic."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from gpumosaic.experiments.report.mosaic import occupancy
from gpumosaic.experiments.report.stats import band, mean_ci
from gpumosaic.experiments.report.tables import reason_category


def test_mean_ci_is_students_t() -> None:
    ci = mean_ci([1.0, 2.0, 3.0])
    # mean 2, sd 1, sem 1/sqrt(3) = 0.5774, t(0.975, 2) = 4.3027 -> 2.4841
    assert ci.mean == 2.0 and ci.n == 3
    assert math.isclose(ci.half_width, 4.302653 / math.sqrt(3), rel_tol=1e-6)
    assert math.isnan(mean_ci([5.0]).half_width) and mean_ci([5.0]).text() == "5"
    assert mean_ci([float("nan")]).n == 0
    mean, low, high = band(np.array([[1.0, 10.0], [3.0, 10.0]]))
    assert mean.tolist() == [2.0, 10.0] and high[1] == low[1] == 10.0


def test_occupancy_sums_milli_per_gpu_at_each_column_center() -> None:
    # Columns of width 10 over [0, 40): centers 5, 15, 25, 35.
    placements = pd.DataFrame(
        {
            "gpu": [0, 0, 1],
            "milli": [300, 500, 1000],
            "start": [0.0, 10.0, 20.0],
            "end": [40.0, 20.0, 40.0],
        }
    )
    centers, matrix = occupancy(placements, gpus=3, end=40.0, columns=4)
    assert centers.tolist() == [5.0, 15.0, 25.0, 35.0]
    assert matrix.tolist() == [
        [300, 800, 300, 300],  # job 2 (500) holds GPU 0 over [10, 20): the center 15
        [0, 0, 1000, 1000],
        [0, 0, 0, 0],  # an idle GPU keeps its row
    ]


def test_reason_categories_drop_the_details() -> None:
    assert reason_category("waiting (cpu): needs 8000 milli-CPU on one node") == "waiting (cpu)"
    assert reason_category("gpu") == "gpu"
