"""The defaults that differ between a simulated run (``simulate``, ``compare``) and a
live one (``serve``), in one place; every other default is the same in both modes.

- ``RESOLVE_INTERVAL_S``: the least time between two policy solves of Gavel's rounds.
  Simulated: Gavel's 1,920 s (its simulator re-solves on that cadence, and the
  reproductions need it). Live: 0 s, a solve at any round boundary where jobs came or
  went: a live service has few jobs, and a job submitted to it should not wait half an
  hour for its first allocation.
- ``ANTI_THRASHING``: nvshare's anti-thrashing when ``nvshare:...`` does not say.
  Simulated: ``on`` (the model serializes co-located jobs with the quantum, as
  nvshare's published numbers were measured). Live: ``auto`` (the share daemon turns it
  on only when the jobs' working sets overflow the GPU's memory, nvshare's own default).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Generic, TypeVar

T = TypeVar("T")


class Mode(StrEnum):
    SIMULATE = "simulate"
    SERVE = "serve"


@dataclass(frozen=True, slots=True)
class ModeDefault(Generic[T]):
    """One default per mode (the module doc says why they differ)."""

    simulate: T
    serve: T

    def of(self, mode: Mode) -> T:
        return self.simulate if mode is Mode.SIMULATE else self.serve


RESOLVE_INTERVAL_S: ModeDefault[float] = ModeDefault(simulate=1920.0, serve=0.0)
ANTI_THRASHING: ModeDefault[str] = ModeDefault(simulate="on", serve="auto")
