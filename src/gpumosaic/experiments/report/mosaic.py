"""The GPU occupancy mosaic of one run: milli-GPU allocated per GPU (rows) over time or
arrived workload (columns), from the run's placements table."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from gpumosaic.experiments.report.figures import Figure, _layout
from gpumosaic.experiments.report.view import StudyView
from gpumosaic.experiments.results.store import read_description
from gpumosaic.experiments.study.kinds.base import ARRIVED_AXIS

MAX_CELLS = 400_000  # GPUs x columns: keeps a 6,000-GPU cluster's mosaic near 1.5 MB


def choose_run(view: StudyView) -> str | None:
    """The run named by [report] mosaic (first match), else the first run with placements."""
    runs = view.runs
    wanted = view.experiment.report.mosaic
    if wanted:
        mask = np.ones(len(runs), dtype=bool)
        for key, value in wanted.items():
            column = runs[key]
            target = str(float(value)) if column.dtype.kind == "f" else str(value)
            mask &= (column.astype(str) == target).to_numpy()
        for run_id in runs.loc[mask, "run_id"]:
            if (view.root / "runs" / run_id / "placements.parquet").is_file():
                return str(run_id)
    for run_id in runs["run_id"]:
        if (view.root / "runs" / run_id / "placements.parquet").is_file():
            return str(run_id)
    return None


def occupancy(
    placements: pd.DataFrame, gpus: int, end: float, columns: int
) -> tuple[np.ndarray, np.ndarray]:
    """(centers, matrix gpus x columns): milli held on each GPU at each column's center."""
    edges = np.linspace(0.0, end, columns + 1)
    centers = (edges[:-1] + edges[1:]) / 2
    diff = np.zeros((gpus, columns + 1), dtype=np.int64)
    gpu = placements["gpu"].to_numpy(dtype=np.int64)
    milli = placements["milli"].to_numpy(dtype=np.int64)
    first = np.searchsorted(centers, placements["start"].to_numpy(dtype=float), side="left")
    stop = np.searchsorted(centers, placements["end"].to_numpy(dtype=float), side="left")
    np.add.at(diff, (gpu, first), milli)
    np.add.at(diff, (gpu, stop), -milli)
    return centers, np.cumsum(diff, axis=1)[:, :columns]


def mosaic_figure(view: StudyView) -> Figure | None:
    run_id = choose_run(view)
    if run_id is None:
        return None
    placements = view.table(run_id, "placements")
    if placements is None or placements.empty:
        return None
    description = read_description(view.root, run_id)
    gpus = int(description.get("cluster_gpus") or placements["gpu"].max() + 1)
    end = float(placements["end"].max())
    columns = int(max(30, min(150, MAX_CELLS // max(gpus, 1))))
    centers, matrix = occupancy(placements, gpus, end, columns)
    arrived = description.get("axis") == ARRIVED_AXIS
    x_title = "arrived workload, % of cluster GPUs" if arrived else "time (h)"
    x = centers if arrived else centers / 3600.0
    row = view.runs.loc[view.runs["run_id"] == run_id].iloc[0]
    name = view.run_label(row)
    spec: dict[str, Any] = {
        "data": [
            {
                "type": "heatmap",
                "z": matrix.tolist(),
                "x": [float(f"{v:.4g}") for v in x],
                "zmin": 0,
                "zmax": 1000,
                "colorscale": "Viridis",
                "colorbar": {"title": {"text": "milli"}},
                "hovertemplate": f"GPU %{{y}}<br>{x_title} %{{x}}<br>%{{z}} milli<extra></extra>",
            }
        ],
        "layout": _layout(
            f"GPU occupancy: {name}",
            x_title,
            f"GPU (one row each, {gpus} in all)",
            height=min(900, max(320, 40 + gpus * 6)),
        ),
    }
    spec["layout"]["yaxis"]["autorange"] = "reversed"
    # GPUs are whole: integer ticks (plotly would put some at 0.5 on a few rows).
    spec["layout"]["yaxis"].update(
        {"tickmode": "auto", "tickformat": "d", "dtick": max(1, gpus // 10)}
    )
    return Figure(
        "mosaic-plot",
        f"GPU occupancy mosaic ({name})",
        "Milli-GPU allocated on each GPU (rows, in node order) over the run; set which run "
        "with [report] mosaic = { axis = value, ... } in the experiment file.",
        spec,
    )
