"""The workload of ``gavel-trace:PATH``: a Gavel trace's jobs with Gavel's throughputs."""

from __future__ import annotations

from pathlib import Path

from gpumosaic.traces.gavel_trace import load_gavel_trace
from gpumosaic.workloads.throughputs import GavelThroughputTable
from gpumosaic.workloads.workload import Workload


def gavel_trace_workload(path: str | Path, table: GavelThroughputTable | None = None) -> Workload:
    """The workload of spec ``gavel-trace:PATH``: every job measured, Gavel's throughputs."""
    table = table or GavelThroughputTable.load()
    jobs = tuple(load_gavel_trace(path, table))
    return Workload(f"gavel-trace:{Path(path).name}", jobs, table)
