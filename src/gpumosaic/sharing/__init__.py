"""Sharing a GPU by time and by packing: interference models, nvshare time-slicing and the
clock-free GPU lock that the nvshare model and the live share daemon both drive."""

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
