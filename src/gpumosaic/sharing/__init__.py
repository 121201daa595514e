"""Sharing a GPU by time and by packing: interference models, nvshare time-slicing and the
clock-free GPU lock that the nvshare model and the live share daemon both drive.

The names load on first use (PEP 562): ``sharing.spec`` (``--sharing``'s grammar) is plain
Python, and checking a ``--sharing`` must not pay for the models' numpy; an emulated job
reads ``sharing.gpu_phase`` at start-up without it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpumosaic.lazy import lazy_names

if TYPE_CHECKING:
    from gpumosaic.sharing.interference import (
        CoLocatedJob,
        InterferenceModel,
        MeasuredInterference,
        NoInterference,
        ParametricInterference,
        build_interference,
    )
    from gpumosaic.sharing.jobs import Phase, SharedJob
    from gpumosaic.sharing.lock import AntiThrashing, GpuLock
    from gpumosaic.sharing.nvshare import NvshareModel
    from gpumosaic.sharing.outcome import JobOutcome, SharingOutcome
    from gpumosaic.sharing.paging import PagingModel

# name -> the module under gpumosaic.sharing that defines it
_WHERE = {
    "CoLocatedJob": "interference",
    "InterferenceModel": "interference",
    "MeasuredInterference": "interference",
    "NoInterference": "interference",
    "ParametricInterference": "interference",
    "build_interference": "interference",
    "Phase": "jobs",
    "SharedJob": "jobs",
    "AntiThrashing": "lock",
    "GpuLock": "lock",
    "NvshareModel": "nvshare",
    "JobOutcome": "outcome",
    "SharingOutcome": "outcome",
    "PagingModel": "paging",
}


__getattr__ = lazy_names(__name__, _WHERE)


__all__ = [
    "AntiThrashing",
    "CoLocatedJob",
    "GpuLock",
    "InterferenceModel",
    "JobOutcome",
    "MeasuredInterference",
    "NoInterference",
    "NvshareModel",
    "PagingModel",
    "ParametricInterference",
    "Phase",
    "SharedJob",
    "SharingOutcome",
    "build_interference",
]
