"""Run many RunRequests in parallel worker processes, with a progress bar."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence
from concurrent.futures import as_completed
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from gpumosaic.experiments.pool import process_pool
from gpumosaic.experiments.runner import RunRequest, run_request
from gpumosaic.metrics.summary import Summary, jct_values
from gpumosaic.sim.result import Timeline


@dataclass(frozen=True, slots=True)
class SweepRun:
    request: RunRequest
    summary: Summary
    jcts_s: npt.NDArray[np.float64]
    timeline: Timeline


def _one(request: RunRequest) -> SweepRun:
    outcome = run_request(request)
    result = outcome.result
    return SweepRun(request, outcome.summary, jct_values(result.records), result.timeline)


def default_workers() -> int:
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1)


def run_sweep(
    requests: Sequence[RunRequest],
    workers: int,
    on_done: Callable[[int, int], None] | None = None,
) -> list[SweepRun]:
    """Results in the order of ``requests`` (whatever order the workers finish in)."""
    results: list[SweepRun | None] = [None] * len(requests)
    if workers <= 1 or len(requests) == 1:
        for i, request in enumerate(requests):
            results[i] = _one(request)
            if on_done:
                on_done(i + 1, len(requests))
    else:
        with process_pool(workers) as pool:
            futures = {pool.submit(_one, r): i for i, r in enumerate(requests)}
            for done, future in enumerate(as_completed(futures), start=1):
                results[futures[future]] = future.result()
                if on_done:
                    on_done(done, len(requests))
    return [r for r in results if r is not None]


def parse_seeds(text: str) -> list[int]:
    """``0-9`` -> 0..9 inclusive; ``0,3,5`` -> those; ``42`` -> [42]."""
    seeds: list[int] = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        if not re.fullmatch(r"\d+(-\d+)?", part):
            raise ValueError(f"{part!r} is not a seed (whole numbers >= 0: 0-9, 0,1,2 or 42)")
        start, dash, end = part.partition("-")
        if dash:
            lo, hi = int(start), int(end)
            if hi < lo:
                raise ValueError(f"seed range {part!r} runs backwards")
            seeds.extend(range(lo, hi + 1))
        else:
            seeds.append(int(part))
    if not seeds:
        raise ValueError("no seeds given")
    return seeds
