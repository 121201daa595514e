"""``gpumosaic sim-vs-live``: the live round service measured against the simulator."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from gpumosaic.cli.app import app, check_out_dir, check_seed, err_console, user_errors
from gpumosaic.cli.sim_vs_live.table import print_agreement

if TYPE_CHECKING:
    from gpumosaic.experiments.sim_vs_live.rounds import Comparison

WORKLOAD_HELP = "any workload simulate takes (gavel:jobs=N,rate=R,..., a job list, ...)"


@app.command(
    name="sim-vs-live",
    epilog="Example: gpumosaic sim-vs-live --cluster v100:2,p100:2,k80:2 --workload "
    "gavel:jobs=12,rate=0 --policy max_min_fairness_perf --time-scale 200 --json",
)
@user_errors
def sim_vs_live(
    workload: Annotated[str, typer.Option(help=WORKLOAD_HELP)],
    policy: Annotated[str, typer.Option(help="a Gavel policy")],
    placement: Annotated[str | None, typer.Option(help="placement (default fgd)")] = None,
    round_s: Annotated[float, typer.Option(help="round length, job time")] = 360.0,
    time_scale: Annotated[
        float | None, typer.Option(help="job seconds per wall second (default: from the budget)")
    ] = None,
    wall_budget_s: Annotated[
        float, typer.Option(help="wall time the live run should take when no --time-scale")
    ] = 600.0,
    seed: Annotated[int, typer.Option(help="seed of every random choice")] = 0,
    sharing: Annotated[
        str | None,
        typer.Option(
            help="nvshare:tq=S[,anti_thrashing=on|off|auto] (tq in job time): fractional "
            "jobs under serve's share runtime live, the nvshare model in the simulator"
        ),
    ] = None,
    out: Annotated[
        Path | None, typer.Option(help="folder: jobs.csv, summary.json, jct_diff.png")
    ] = None,
    json_out: Annotated[bool, typer.Option("--json", help="print the comparison as JSON")] = False,
    mechanism: Annotated[
        str,
        typer.Option(
            help="rounds (Gavel's rounds) or gandiva[:key=value,...] (serve --mechanism "
            "gandiva against simulate --mechanism gandiva; --policy fifo)"
        ),
    ] = "rounds",
    cluster: Annotated[
        str | None,
        typer.Option(help="MODEL:COUNT,... (logical GPUs on local Ray); not with slurm"),
    ] = None,
    executor: Annotated[
        str, typer.Option(help="ray (local Ray) or slurm (the Slurm of SLURM_CONF)")
    ] = "ray",
    slurm_conf: Annotated[
        str | None, typer.Option(help="the Slurm's slurm.conf (default: SLURM_CONF)")
    ] = None,
) -> None:
    """Run a workload on a local live service (emulated jobs on Ray, loopback, or as
    Slurm batch jobs) and in the simulator (--mechanism rounds), and print both side by
    side."""
    from gpumosaic.run.description import RunDescription

    check_seed(seed)
    check_out_dir(out)
    cluster = _cluster_of(cluster, executor, slurm_conf, mechanism)
    description = RunDescription(
        cluster=cluster,
        workload=workload,
        policy=policy,
        placement=placement,
        seed=seed,
        mechanism="rounds",
        round_s=round_s,
    )
    description.check_inputs()  # a mistake's line before the live service's imports
    from gpumosaic.experiments.sim_vs_live.agreement import write_outputs
    from gpumosaic.experiments.sim_vs_live.inputs import SimVsLiveOptions
    from gpumosaic.experiments.sim_vs_live.rounds import compare

    options = SimVsLiveOptions(
        description,
        time_scale,
        wall_budget_s,
        sharing=sharing,
        executor=executor,
        slurm_conf=slurm_conf,
    )

    def say(line: str) -> None:
        err_console.print(line, highlight=False, soft_wrap=True)

    if mechanism.strip().lower() != "rounds":
        from gpumosaic.cli.sim_vs_live.gandiva import run_gandiva

        run_gandiva(options, mechanism, out, json_out, say)
        return
    comparison = compare(options, say=say)
    if out is not None:
        for path in write_outputs(comparison, out, options.scenario()):
            say(f"wrote {path}")
    if json_out:
        print(json.dumps(comparison.to_json(), indent=2, allow_nan=False))
        return
    _print_table(comparison)


def _cluster_of(cluster: str | None, executor: str, slurm_conf: str | None, mechanism: str) -> str:
    """--cluster on Ray; on Slurm the cluster is Slurm's (its GPUs per model)."""
    from gpumosaic.errors import InputError

    if executor not in ("ray", "slurm"):
        raise InputError("one of ray, slurm", field="--executor", value=executor)
    if executor == "ray":
        if slurm_conf is not None:
            raise InputError("needs --executor slurm", field="--slurm-conf", value=slurm_conf)
        if cluster is None:
            raise InputError("required (MODEL:COUNT,...) with --executor ray", field="--cluster")
        return cluster
    if cluster is not None:
        raise InputError(
            "does not go with --executor slurm (the cluster is Slurm's)", field="--cluster"
        )
    if mechanism.strip().lower() != "rounds":
        raise InputError("only rounds with --executor slurm", field="--mechanism", value=mechanism)
    from gpumosaic.experiments.sim_vs_live.inputs import slurm_cluster

    counts = slurm_cluster(slurm_conf).spec.gpus_per_model()
    return ",".join(f"{model}:{count}" for model, count in counts.items())


def _print_table(c: Comparison) -> None:
    rounds = ("rounds", str(c.sim.rounds), str(c.live.rounds), f"{c.rounds_identical} same")
    print_agreement(
        "sim vs live",
        c,
        [rounds],
        f"launch latency {c.launch_latency_wall_s:.3f} s wall = {c.launch_latency_s:.1f} s "
        f"job = {100 * c.latency_share:.1f}% of a round",
    )
    if c.sharing is not None:
        print(c.sharing.line())
