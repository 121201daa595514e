"""Means with 95% confidence intervals over seeds (Student's t)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from scipy.special import stdtrit  # Student's t quantile; lighter than scipy.stats


@dataclass(frozen=True, slots=True)
class MeanCI:
    mean: float
    half_width: float  # of the 95% interval; NaN with fewer than two values
    n: int

    def scaled(self, factor: float) -> MeanCI:
        """The same in another unit (hours from seconds, % from a fraction)."""
        return MeanCI(self.mean * factor, self.half_width * factor, self.n)

    def text(self, digits: int = 4) -> str:
        if math.isnan(self.mean):
            return "-"
        if self.n < 2 or math.isnan(self.half_width):
            return number(self.mean, digits)
        return f"{number(self.mean, digits)} ± {number(self.half_width, 2)}"


def number(value: float, digits: int = 4) -> str:
    """Readable: 143,047 rather than 1.43e+05; small values with ``digits`` significant."""
    if math.isnan(value):
        return "-"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    if abs(value) >= 10.0 ** (digits - 1):  # 140 with 2 digits: 140, not 1.4e+02
        return f"{value:.0f}"
    return f"{value:.{digits}g}"


def mean_ci(values: npt.ArrayLike) -> MeanCI:
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v)]
    n = len(v)
    if n == 0:
        return MeanCI(math.nan, math.nan, 0)
    if n == 1:
        return MeanCI(float(v[0]), math.nan, 1)
    sem = float(v.std(ddof=1)) / math.sqrt(n)
    return MeanCI(float(v.mean()), float(stdtrit(n - 1, 0.975)) * sem, n)


def band(matrix: npt.NDArray[np.float64]) -> tuple[npt.NDArray[np.float64], ...]:
    """Column-wise mean and 95% interval (lower, upper) of a runs x points matrix."""
    mean = np.nanmean(matrix, axis=0)
    n = matrix.shape[0]
    if n < 2:
        return mean, mean, mean
    half = float(stdtrit(n - 1, 0.975)) * np.nanstd(matrix, axis=0, ddof=1) / math.sqrt(n)
    return mean, mean - half, mean + half
