"""Gandiva on a small job list: what it decided, counted by action.

    PYTHONPATH=src python examples/gandiva_demo.py [examples/gandiva_jobs.csv]

Two servers of 4 V100s and 19 jobs (examples/gandiva_jobs.csv, Gavel job types with
steps): two 2-GPU jobs and eleven 1-GPU jobs arrive in the first minutes, more than
the 8 GPUs hold, so 1-GPU jobs time-slice (suspend/resume every 60 s) and waiting ones
are packed beside running ones; at 1.5 h a 4-GPU job finds no server with 4 free GPUs
and a job migrates to make room; then a burst of Recommendation jobs, which pack
badly, has pairs undone by introspection. The simulator drives Gandiva's clock-free
decider; every step's typed actions are counted here as they come.
"""

from __future__ import annotations

import sys
from collections import Counter

import numpy as np

from gpumosaic.mechanisms.gandiva import Migrate, Step
from gpumosaic.mechanisms.gandiva.sim import GandivaConfig, GandivaSimulator
from gpumosaic.results.result import JobStatus
from gpumosaic.workloads.spec import parse_cluster, parse_workload

WIDTHS = (5, 7, 9, 7, 13)


def main(path: str = "examples/gandiva_jobs.csv") -> Counter[str]:
    cluster = parse_cluster("v100:8", gpus_per_node=4)
    workload = parse_workload(path, seed=0).workload
    actions: Counter[str] = Counter()

    def count(now: float, step: Step) -> None:
        for action in step.actions:
            kind = type(action).__name__
            if isinstance(action, Migrate):
                where = "within its server" if action.same_node else "to another server"
                kind += f" ({action.reason.value}, {where})"
            actions[kind] += 1

    result = GandivaSimulator(
        cluster, workload, GandivaConfig(), np.random.default_rng(0), on_step=count
    ).run()
    report = result.gandiva
    assert report is not None
    done = [r for r in result.records if r.status is JobStatus.COMPLETED]
    avg_jct_h = sum(r.jct_s for r in done) / len(done) / 3600
    print(
        f"{len(done)} of {len(result.records)} jobs completed, makespan "
        f"{result.end_s / 3600:.2f} h, avg JCT {avg_jct_h:.2f} h"
    )
    print("actions:", ", ".join(f"{kind} {n}" for kind, n in sorted(actions.items())))
    print(
        f"packs tried {report.packs_tried:.0f}, kept {report.packs_kept:.0f}, "
        f"undone {report.packs_undone:.0f}; migrations {report.migrations:.0f} "
        f"({report.defragmentations:.0f} to defragment); "
        f"suspended {report.suspended_s / 3600:.2f} job-h"
    )
    head = ("job", "type", "GPUs", "JCT h", "resumes", "migr.", "suspended h")
    print(
        f"{head[0]:<8}{head[1]:<34}"
        + "".join(f"{h:>{w}}" for h, w in zip(head[2:], WIDTHS, strict=True))
    )
    for r in result.records:
        print(
            f"{r.name:<8}{r.job_type:<34}{r.num_gpu:>5}{r.jct_s / 3600:>7.2f}{r.handovers:>9}"
            f"{r.migrations:>7}{r.suspended_s / 3600:>13.2f}"
        )
    return actions


if __name__ == "__main__":
    main(*sys.argv[1:2])
