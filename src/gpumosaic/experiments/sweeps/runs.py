"""Run many RunRequests in parallel worker processes, with a progress bar.

The simulator is imported by the runs themselves (``run_one``), not by this module: the
command line imports it for ``parse_seeds`` and the comparison's plumbing."""

from __future__ import annotations

import csv
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from gpumosaic.experiments.parallel import default_workers, parallel_map

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from gpumosaic.experiments.runner import RunRequest
    from gpumosaic.results.result import Timeline
    from gpumosaic.results.summary import Summary

__all__ = ["SweepRun", "default_workers", "parse_seeds", "run_one", "run_sweep", "write_runs_csv"]


@dataclass(frozen=True, slots=True)
class SweepRun:
    request: RunRequest
    summary: Summary
    jcts_s: npt.NDArray[np.float64]  # measured, completed jobs, in record order
    timeline: Timeline
    job_ids: npt.NDArray[np.int64]  # the job of each entry of ``jcts_s``
    kernels: str = "none"  # what ran the compiled kernels in its process (kernel_aot)

    def jct_of(self, ids: frozenset[int]) -> npt.NDArray[np.float64]:
        """The JCTs of the jobs ``ids`` (which this run completed), in record order."""
        import numpy as np

        keep = np.fromiter((int(i) in ids for i in self.job_ids), bool, len(self.job_ids))
        return self.jcts_s[keep]

    @property
    def completed_ids(self) -> frozenset[int]:
        return frozenset(self.job_ids.tolist())


def run_one(request: RunRequest) -> SweepRun:
    from gpumosaic.experiments.runner import run_request
    from gpumosaic.kernel_cache import kernels_ran
    from gpumosaic.results.summary import completed_job_ids, jct_values

    outcome = run_request(request)
    result = outcome.result
    records = result.records
    return SweepRun(
        request,
        outcome.summary,
        jct_values(records),
        result.timeline,
        completed_job_ids(records),
        kernels_ran(),
    )


def run_sweep(
    requests: Sequence[RunRequest],
    workers: int,
    on_done: Callable[[int, int], None] | None = None,
) -> list[SweepRun]:
    """Results in the order of ``requests`` (whatever order the workers finish in)."""
    progress = None if on_done is None else lambda done, total, _run: on_done(done, total)
    return parallel_map(run_one, requests, workers, progress)


# At most this many seeds in one comparison or study (past it a typo starts days of work).
MAX_SEEDS = 10_000


def parse_seeds(text: str) -> list[int]:
    """``0-9`` -> 0..9 inclusive; ``0,3,5`` -> those; ``42`` -> [42]; at most
    ``MAX_SEEDS`` of them (counted before any list is made)."""
    seeds: list[int] = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        if not re.fullmatch(r"\d+(-\d+)?", part):
            raise ValueError(f"{part!r} is not a seed (whole numbers >= 0: 0-9, 0,1,2 or 42)")
        start, dash, end = part.partition("-")
        if dash:
            lo, hi = int(start), int(end)
            if hi < lo:
                raise ValueError(f"seed range {part!r} runs backwards")
            if len(seeds) + hi - lo + 1 > MAX_SEEDS:
                raise ValueError(f"more than {MAX_SEEDS:,} seeds (at most {MAX_SEEDS:,})")
            seeds.extend(range(lo, hi + 1))
        else:
            seeds.append(int(part))
        if len(seeds) > MAX_SEEDS:
            raise ValueError(f"more than {MAX_SEEDS:,} seeds (at most {MAX_SEEDS:,})")
        if seeds[-1] > 2**32 - 1:
            raise ValueError(f"seed {seeds[-1]} is past 4294967295 (2^32 - 1)")
    if not seeds:
        raise ValueError("no seeds given")
    return seeds


def write_runs_csv(runs: Sequence[SweepRun], path: Path) -> None:
    """One row per run: the run description's fields, then every summary key (seconds,
    fractions); the same columns for every comparison (``runs.csv``, ``policy_runs.csv``)."""
    if not runs:
        path.write_text("")
        return
    first = {**runs[0].request.to_json(), **runs[0].summary.to_json()}
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(first))
        writer.writeheader()
        for run in runs:
            row = {**run.request.to_json(), **run.summary.to_json()}
            row["fallbacks"] = json.dumps(row["fallbacks"], sort_keys=True)
            writer.writerow(row)
