"""Gavel's own job stream moved to ``workloads/gavel_stream.py`` (a workload, not an
experiment); this path re-exports it for code that imports it from here."""

from gpumosaic.workloads.gavel_stream import GAVEL_JOB_TABLE, GavelStream, gavel_stream_workload

__all__ = ["GAVEL_JOB_TABLE", "GavelStream", "gavel_stream_workload"]
