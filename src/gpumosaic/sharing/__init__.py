"""Sharing a GPU by time and by packing: interference models, nvshare time-slicing and the
clock-free GPU lock that the nvshare model and the live share daemon both drive.

The names below load on first use (PEP 562), so a process that needs one leaf module
(an emulated job reads ``sharing.gpu_phase`` at start-up) does not import numpy."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

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

_HOME = {
    "AntiThrashing": "lock",
    "CoLocatedJob": "interference",
    "GpuLock": "lock",
    "InterferenceModel": "interference",
    "JobOutcome": "outcome",
    "MeasuredInterference": "interference",
    "NoInterference": "interference",
    "NvshareModel": "nvshare",
    "PagingModel": "paging",
    "ParametricInterference": "interference",
    "Phase": "jobs",
    "SharedJob": "jobs",
    "SharingOutcome": "outcome",
    "build_interference": "interference",
}

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


def __getattr__(name: str) -> Any:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{home}"), name)
