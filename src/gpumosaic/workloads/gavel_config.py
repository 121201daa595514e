"""The configuration of Gavel's job generator (``gavel.py``), plain Python: a
``--workload gavel:...`` is checked with it before numpy loads."""

from __future__ import annotations

from dataclasses import dataclass

# The largest workload the generator makes up front: about 1 GB of job records and a
# run of tens of minutes on one core. Long steady-state studies use window=A-B, which
# generates jobs lazily and stops when the window's jobs are done.
MAX_GENERATED_JOBS = 200_000


@dataclass(frozen=True, slots=True)
class GavelWorkloadConfig:
    """``jobs`` None means unbounded (generate until the window's jobs are done)."""

    jobs: int | None = None
    rate_per_hour: float = 0.0
    window: tuple[int, int] | None = None
    multigpu: bool = False
    spatial_milli: bool = False

    def __post_init__(self) -> None:
        if self.jobs is None and self.window is None:
            raise ValueError("a generated workload needs jobs=N or window=A-B")
        if self.jobs is not None and self.jobs < 1:
            raise ValueError("jobs must be >= 1")
        if self.jobs is not None and self.jobs > MAX_GENERATED_JOBS:
            raise ValueError(
                f"jobs={self.jobs} is over the limit of {MAX_GENERATED_JOBS:,} generated jobs "
                "(memory grows with the job count; use window=A-B with a rate to study a "
                "steady state instead)"
            )
        if self.rate_per_hour < 0:
            raise ValueError("rate must be >= 0 jobs per hour")
        if self.window is not None:
            start, end = self.window
            if not 0 <= start < end:
                raise ValueError("window A-B needs 0 <= A < B")
            if self.jobs is not None and self.jobs < end:
                raise ValueError(f"window end {end} is past jobs={self.jobs}")
        if self.window is not None and self.rate_per_hour == 0 and self.jobs is None:
            raise ValueError("a window with rate=0 needs jobs=N")
