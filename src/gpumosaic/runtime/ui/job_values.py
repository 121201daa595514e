"""How every live page shows a stored job's numbers (issue 36: live views that tell the
truth): counts of steps as integers where they are (``150000``, not ``150000.0``), and
no GPU for a job that never held one (the store keeps its default GPU fields, V100 and
index 0, for a job that never started)."""

from __future__ import annotations

import math

from gpumosaic.runtime.ui.state_file import JobFacts


def rounded(value: float, digits: int = 3) -> float | None:
    """Rounded and JSON-safe (None for NaN/inf): fewer bytes, fewer spurious changes."""
    if not math.isfinite(value):
        return None
    return round(float(value), digits)


def step_count(value: float) -> int | float | None:
    """A count of steps: an integer when it is one (``150000``, not ``150000.0``)."""
    shown = rounded(value, 1)
    if shown is not None and shown.is_integer():
        return int(shown)
    return shown


def held_a_gpu(job: JobFacts) -> bool:
    """Running, or it made progress on a GPU: the store's GPU fields name one it used.
    A job that never started (or failed before its first step) names none."""
    return job.state == "running" or job.steps_done > 0
