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


def test_metrics_are_named_and_scaled_as_the_cli_prints_them() -> None:
    from gpumosaic.experiments.report.units import display

    jct = display("avg_jct_s")
    assert jct.label == "avg JCT (h)" and jct.value(7200.0) == 2.0
    util = display("utilization")
    assert util.label == "GPU utilization (%)" and math.isclose(util.value(0.714), 71.4)
    assert display("fragmentation_rate_mean").label == "fragmentation rate (time avg) (%)"
    assert display("avg_jct_h").value(3.0) == 3.0  # already in hours
    assert display("allocation_rate_pct_90").label == "allocation rate at 90% arrived (%)"
    assert display("power_kw_130").label == "power at 130% arrived (kW)"
    assert display("allocation_rate_pct_final").label == "allocation rate at the end (%)"
    assert display("lock_wait_s").label == "lock wait (s)"
    assert display("handovers").label == "handovers"
    assert mean_ci([3600.0, 7200.0]).scaled(1 / 3600).mean == 1.5


def test_numbers_read_without_exponents() -> None:
    from gpumosaic.experiments.report.stats import number

    assert [number(v, 2) for v in (140.0, 1.4, 0.00123, 12345.0)] == [
        "140", "1.4", "0.0012", "12,345",
    ]  # fmt: skip


def test_a_reference_set_gets_the_ratio_to_its_first_row() -> None:
    from gpumosaic.experiments.report.stats import MeanCI
    from gpumosaic.experiments.report.tables import Ratio

    q = Ratio("placement=strided", ours=0.91, reference=0.904)
    assert math.isclose(q.error_pct, 100 * (0.91 / 0.904 - 1))
    assert math.isnan(Ratio("x", math.nan, 1.0).error_pct)
    assert MeanCI(2.0, 1.0, 3).scaled(100).text() == "200 ± 100"


def test_identical_series_are_named_and_dashed_as_in_the_pngs() -> None:
    from gpumosaic.experiments.report.figures import _mark_identical

    traces = {
        name: [{"name": f"{name} (seed 0)", "line": {"width": 2}, "showlegend": True}]
        for name in ("strided", "fgd", "bestfit")
    }
    same = np.array([1.0, 2.0, 3.0])
    series = {"strided": (np.array([1.0, 2.0, 4.0]),), "fgd": (same,), "bestfit": (same.copy(),)}
    note = _mark_identical(traces, series)
    assert traces["bestfit"][0]["name"] == "bestfit (= fgd) (seed 0)"
    assert traces["bestfit"][0]["line"]["dash"] == "dash"
    assert "dash" not in traces["fgd"][0]["line"] and "dash" not in traces["strided"][0]["line"]
    assert note.endswith("fgd = bestfit")
    assert _mark_identical({"a": [{"name": "a"}]}, {"a": (same,)}) == ""
