"""Sharing a GPU by time and by packing: interference models and nvshare time-slicing."""

from gpumosaic.sharing.interference import (
    CoLocatedJob,
    InterferenceModel,
    MeasuredInterference,
    NoInterference,
    ParametricInterference,
    build_interference,
)
from gpumosaic.sharing.jobs import Phase, SharedJob
from gpumosaic.sharing.nvshare import NvshareModel
from gpumosaic.sharing.outcome import JobOutcome, SharingOutcome
from gpumosaic.sharing.paging import PagingModel

__all__ = [
    "CoLocatedJob",
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
