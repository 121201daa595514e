"""The service's clock under a time scale: job time runs ``scale`` times faster than wall
time, so a trace of hours runs live in minutes while every record (round starts, lease
grants, JCTs, rates) stays in job time.

What is *not* scaled: the service's own decisions. While the driver decides a round
(``held()``), job time advances at wall speed, as it would on a cluster at scale 1: a
40 ms policy solve costs 40 ms of job time, not 40 x ``scale``. Everything a job does
(starting, stepping, reporting) runs under the scale: a launch that takes 0.3 s of wall
time takes 0.3 x ``scale`` s of job time (docs/live.md, "Time scale", states the limit
this sets on ``scale``; the simulator models it as ``launch_latency_s``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

ENV_TIME_SCALE = "GPUMOSAIC_TIME_SCALE"
MAX_TIME_SCALE = 10_000.0  # beyond it a 1 ms poll is > 10 s of job time


def check_time_scale(scale: float) -> float:
    """The scale, or ValueError: finite, >= 1 and at most ``MAX_TIME_SCALE``."""
    if not (1.0 <= scale <= MAX_TIME_SCALE):  # also refuses NaN
        raise ValueError(f"must be between 1 and {MAX_TIME_SCALE:g}")
    return float(scale)


class ScaledClock:
    """``now()`` in job time (seconds; starts at the wall time of creation)."""

    def __init__(self, scale: float, wall: Callable[[], float] = time.time) -> None:
        self.scale = check_time_scale(scale)
        self._wall = wall
        self._lock = threading.Lock()
        self._origin_wall = wall()
        self._origin_job = self._origin_wall
        self._holds = 0

    def __call__(self) -> float:
        return self.now()

    def now(self) -> float:
        with self._lock:
            rate = 1.0 if self._holds else self.scale
            return self._origin_job + rate * (self._wall() - self._origin_wall)

    def _rebase(self, holds: int) -> None:
        # Called with the lock held: fix the origin where the rate changes.
        wall = self._wall()
        rate = 1.0 if self._holds else self.scale
        self._origin_job += rate * (wall - self._origin_wall)
        self._origin_wall = wall
        self._holds = holds

    @contextmanager
    def held(self) -> Iterator[None]:
        """Job time runs at wall speed inside (the service deciding a round)."""
        with self._lock:
            self._rebase(self._holds + 1)
        try:
            yield
        finally:
            with self._lock:
                self._rebase(self._holds - 1)

    def wall_seconds(self, job_s: float) -> float:
        """Wall seconds that ``job_s`` of job time take (outside a hold)."""
        return job_s / self.scale
