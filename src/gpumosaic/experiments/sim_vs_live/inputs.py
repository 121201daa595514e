"""What both sides of a sim-vs-live comparison start from: the options, the workload's
jobs the live side may submit, and the live cluster (the Ray this process joined, or a
local one on loopback) with its GPU models."""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import islice
from typing import TYPE_CHECKING

from gpumosaic.errors import InputError
from gpumosaic.mechanisms.contract import RunParts
from gpumosaic.model.job import JobSpec
from gpumosaic.run.description import RunDescription
from gpumosaic.runtime.timescale import MAX_TIME_SCALE

if TYPE_CHECKING:
    from gpumosaic.runtime.cluster import LiveCluster

MAX_LIVE_JOBS = 2000  # jobs materialised for the live side (a window's stream is cut there)
BUDGET_SHARE = 0.8  # of --wall-budget-s given to the live run's job-time makespan


@dataclass(frozen=True, slots=True)
class SimVsLiveOptions:
    description: RunDescription
    time_scale: float | None = None  # None: from wall_budget_s
    wall_budget_s: float = 600.0
    wall_limit_s: float | None = None  # stop the live run (default 3 x the budget)
    sharing: str | None = None  # --sharing nvshare:... (experiments/sim_vs_live/sharing.py)
    executor: str = "ray"  # ray (local Ray) or slurm (the Slurm SLURM_CONF names)
    slurm_conf: str | None = None  # --slurm-conf (None: SLURM_CONF)

    def scenario(self, mechanism: str = "rounds") -> str:
        """What is compared, for figure titles: mechanism, policy + placement, cluster,
        workload, seed (and the sharing model)."""
        d = self.description
        text = (
            f"{mechanism}, {d.policy} + {d.placement} on {d.cluster}, {d.workload}, seed {d.seed}"
        )
        return text + (f", sharing {self.sharing}" if self.sharing else "")

    def __post_init__(self) -> None:
        if self.time_scale is not None and not 1.0 <= self.time_scale <= MAX_TIME_SCALE:
            raise InputError(
                f"must be between 1 and {MAX_TIME_SCALE:g}",
                field="--time-scale",
                value=self.time_scale,
            )
        if not 1.0 <= self.wall_budget_s <= 86_400.0:
            raise InputError(
                "must be between 1 and 86400 seconds", field="--wall-budget-s",
                value=self.wall_budget_s,
            )  # fmt: skip


def live_cluster(counts: Sequence[tuple[str, int]]) -> LiveCluster:
    """Join the Ray this process already runs (tests) or start a local one."""
    import ray

    from gpumosaic.runtime.cluster import discover, local_ray_resources, ray_nodes
    from gpumosaic.runtime.executors.ray_connect import init_local_ray

    if not ray.is_initialized():
        os.environ.setdefault("RAY_AUTH_MODE", "disabled")  # our own loopback instance
        num_gpus, resources = local_ray_resources(counts)
        init_local_ray(  # our own instance: loopback only
            num_cpus=os.cpu_count() or 1,
            num_gpus=num_gpus,
            resources=resources,
            logging_level=logging.ERROR,
            log_to_driver=False,
        )
    return discover(ray_nodes(ray.nodes()), counts)


def slurm_cluster(slurm_conf: str | None) -> LiveCluster:
    """The Slurm cluster ``slurm_conf`` (or ``SLURM_CONF``) names: its nodes that are up
    and their typed GPUs (``serve --executor slurm``'s)."""
    from gpumosaic.run.serve import ServeDescription, connect_slurm

    return connect_slurm(ServeDescription(port=0, executor="slurm", slurm_conf=slurm_conf))


def model_counts(parts: RunParts) -> list[tuple[str, int]]:
    return list(parts.cluster.gpus_per_model().items())


def finite_jobs(parts: RunParts) -> list[JobSpec]:
    """The jobs the live side may submit. A window's stream goes on past the window (as
    the simulator's does, until the window's jobs are done: the replay stops there),
    cut at ``MAX_LIVE_JOBS``."""
    jobs = list(islice(iter(parts.workload.jobs), MAX_LIVE_JOBS + 1))
    measure = parts.workload.measure
    if len(jobs) > MAX_LIVE_JOBS and (measure is None or measure[1] > MAX_LIVE_JOBS):
        raise InputError(
            f"the live side replays at most {MAX_LIVE_JOBS} jobs: use jobs=N or a window",
            field="--workload",
        )
    return jobs[:MAX_LIVE_JOBS]
