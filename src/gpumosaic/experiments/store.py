"""Write one run's results: the per-job table, the summary JSON, the timeline, a plot."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pandas as pd

from gpumosaic.errors import InputError
from gpumosaic.results.columns import job_table
from gpumosaic.results.result import SimResult
from gpumosaic.results.summary import Summary


def jobs_frame(result: SimResult) -> pd.DataFrame:
    """The one per-job table (``metrics.columns.job_table``)."""
    return pd.DataFrame(job_table(result.records))


def timeline_frame(result: SimResult) -> pd.DataFrame:
    t = result.timeline
    return pd.DataFrame(
        {
            "time_s": t.time_s,
            "allocated_milli": t.allocated_milli,
            "running": t.running,
            "queued": t.queued,
            "fragmentation_rate": t.fragmentation_rate,
            "power_gpu_w": t.power_gpu_w,
            "power_cpu_w": t.power_cpu_w,
        }
    )


def write_run(
    result: SimResult,
    summary: Summary,
    out: Path,
    table_format: str = "csv",
    meta: dict[str, Any] | None = None,
) -> list[Path]:
    """Write jobs.{csv,parquet}, timeline.{csv,parquet}, summary.json and run.png."""
    from gpumosaic.experiments.plots.runs import plot_run

    out.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    for name, frame in (("jobs", jobs_frame(result)), ("timeline", timeline_frame(result))):
        if table_format == "parquet":
            _require_pyarrow()
            path = out / f"{name}.parquet"
            frame.to_parquet(path, index=False)
        else:
            path = out / f"{name}.csv"
            frame.to_csv(path, index=False)
        written.append(path)
    summary_path = out / "summary.json"
    payload = {**(meta or {}), **summary.to_json()}
    summary_path.write_text(json.dumps(payload, indent=2, default=_json_default) + "\n")
    written.append(summary_path)
    written.append(plot_run(result, out / "run.png", title=run_title(meta or {})))
    return written


def run_title(meta: dict[str, Any]) -> str:
    """The scenario of one run for its figure: cluster, workload, policy, placement,
    sharing and mechanism where not the defaults, and the seed."""
    parts = [
        f"{meta['policy']} on {meta['cluster']}" if "policy" in meta and "cluster" in meta else "",
        str(meta.get("workload", "")),
        f"placement {meta['placement']}" if meta.get("placement") else "",
        f"sharing {meta['sharing']}" if meta.get("sharing") not in (None, "none") else "",
        f"mechanism {meta['mechanism']}" if meta.get("mechanism") not in (None, "auto") else "",
        f"background {meta['background']}" if meta.get("background") else "",
        f"seed {meta['seed']}" if "seed" in meta else "",
    ]
    return ", ".join(p for p in parts if p)


def _require_pyarrow() -> None:
    try:
        import pyarrow  # noqa: F401  pandas writes parquet through it
    except ImportError:
        raise InputError(
            "parquet output needs pyarrow, the 'parquet' extra: pip install 'gpumosaic[parquet]'",
            field="--format",
        ) from None


def _json_default(value: object) -> object:
    if isinstance(value, float) and math.isnan(value):
        return None
    return str(value)
