"""What every sim-vs-live comparison (Gavel's rounds, Gandiva, sharing) reports: each
job's JCT on both sides, the average JCT and makespan differences, the ``--json`` keys,
and the files ``--out`` writes."""

from __future__ import annotations

import csv
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from gpumosaic.results.result import JobStatus, SimResult
from gpumosaic.results.summary import Summary

if TYPE_CHECKING:
    from gpumosaic.experiments.sim_vs_live.gandiva import GandivaComparison
    from gpumosaic.experiments.sim_vs_live.rounds import Comparison


@dataclass(frozen=True, slots=True)
class JobDiff:
    job_id: int
    sim_jct_s: float
    live_jct_s: float

    @property
    def rel_diff(self) -> float:
        return abs(self.live_jct_s - self.sim_jct_s) / self.sim_jct_s


@dataclass(frozen=True, slots=True)
class Agreement:
    """How far a live run's JCTs are from the simulator's on the same jobs: what every
    sim-vs-live comparison (rounds, Gandiva, sharing) reports, and its ``--json`` keys."""

    sim: Summary
    live: Summary
    jobs: tuple[JobDiff, ...]
    time_scale: float
    wall_s: float  # the live run's wall time

    @property
    def avg_jct_rel_diff(self) -> float:
        return rel(self.live.avg_jct_s, self.sim.avg_jct_s)

    @property
    def makespan_rel_diff(self) -> float:
        return rel(self.live.makespan_s, self.sim.makespan_s)

    def per_job_quantile(self, q: float) -> float:
        diffs = [d.rel_diff for d in self.jobs]
        return float(np.quantile(diffs, q)) if diffs else math.nan

    def agreement_json(
        self,
        sim: Mapping[str, object],
        live: Mapping[str, object],
        rounds_identical: int | None,
    ) -> dict[str, object]:
        """The comparison's JSON: ``sim`` and ``live`` (each side's summary and what the
        comparison adds to it), the differences, and the run's scale and wall time."""

        def clean(x: float) -> float | None:
            return None if math.isnan(x) else x

        return {
            "sim": {**self.sim.to_json(), **sim},
            "live": {**self.live.to_json(), **live},
            "avg_jct_rel_diff": clean(self.avg_jct_rel_diff),
            "makespan_rel_diff": clean(self.makespan_rel_diff),
            "per_job_rel_diff_median": clean(self.per_job_quantile(0.5)),
            "per_job_rel_diff_p90": clean(self.per_job_quantile(0.9)),
            "rounds_identical": rounds_identical,
            "time_scale": self.time_scale,
            "wall_s": self.wall_s,
        }


def rel(live: float, sim: float) -> float:
    """Signed relative difference of live from sim (NaN when either is missing)."""
    if math.isnan(live) or math.isnan(sim) or sim == 0:
        return math.nan
    return (live - sim) / sim


def job_diffs(sim: SimResult, live: SimResult) -> tuple[JobDiff, ...]:
    done = JobStatus.COMPLETED
    sim_jct = {r.job_id: r.jct_s for r in sim.records if r.status is done and r.measured}
    out = []
    for r in live.records:
        if r.status is done and r.job_id in sim_jct and sim_jct[r.job_id] > 0:
            out.append(JobDiff(r.job_id, sim_jct[r.job_id], r.jct_s))
    return tuple(sorted(out, key=lambda d: d.job_id))


def write_outputs(
    comparison: Comparison | GandivaComparison, out: Path, scenario: str = ""
) -> list[Path]:
    """jobs.csv (per-job JCTs and differences), summary.json and, with matplotlib, a
    figure of the per-job relative differences titled with ``scenario``."""
    import json

    out.mkdir(parents=True, exist_ok=True)
    written = []
    path = out / "jobs.csv"
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["job_id", "sim_jct_s", "live_jct_s", "rel_diff"])
        for d in comparison.jobs:
            w.writerow([d.job_id, f"{d.sim_jct_s:.3f}", f"{d.live_jct_s:.3f}", f"{d.rel_diff:.5f}"])
    written.append(path)
    path = out / "summary.json"
    path.write_text(json.dumps(comparison.to_json(), indent=2) + "\n")
    written.append(path)
    try:
        figure = agreement_figure(comparison, scenario)
    except ImportError:
        return written
    path = out / "jct_diff.png"
    figure.savefig(path, dpi=120)
    written.append(path)
    return written


def agreement_figure(comparison: Any, scenario: str) -> Any:
    """Live against simulated JCT per job: what ran (``scenario``: mechanism, policy,
    placement, cluster, workload, seed) in the title, what each panel compares in its
    own."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(10, 4.4), layout="constrained")
    left, right = fig.subplots(1, 2)
    sim = [d.sim_jct_s / 3600 for d in comparison.jobs]
    live = [d.live_jct_s / 3600 for d in comparison.jobs]
    left.scatter(sim, live, s=14)
    top = max([*sim, *live, 1e-9])
    left.plot([0, top], [0, top], color="grey", linewidth=0.8, label="live = simulated")
    left.set_xlabel("simulated JCT (h)")
    left.set_ylabel("live JCT (h)")
    left.set_title(f"JCT per job: live against simulated ({len(sim)} jobs)")
    left.legend(fontsize=8, loc="upper left")
    right.bar(
        [str(d.job_id) for d in comparison.jobs],
        [100 * (d.live_jct_s - d.sim_jct_s) / d.sim_jct_s for d in comparison.jobs],
    )
    right.set_xlabel("job")
    right.set_ylabel("live - sim (% of sim JCT)")
    right.set_title("difference per job (% of the simulated JCT)")
    right.tick_params(axis="x", labelsize=6)
    what = f"sim vs live: {scenario}" if scenario else "sim vs live"
    fig.suptitle(f"{what}; live time scale {comparison.time_scale:.3g}")
    return fig
