"""``gpumosaic compare``: many runs on the same workload, one table and one figure.

Modes: ``sim`` (placements x seeds through ``simulate``), ``fill`` (the FGD/PWR
fill-the-cluster replay of Alibaba openb) and, when ``--policies`` is given, a Gavel-style
sweep of policies x arrival rates x seeds.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from gpumosaic.cli.app import (
    MAX_INFLATE,
    MAX_WORKERS,
    app,
    check_number,
    check_out_dir,
    user_errors,
)
from gpumosaic.cli.bounds import MAX_RATES, check_count
from gpumosaic.cli.compare.checks import check_comparison, check_placements, check_policy_sweep
from gpumosaic.cli.simulate import CLUSTER_HELP, WORKLOAD_HELP
from gpumosaic.errors import InputError, unknown_name

if TYPE_CHECKING:
    pass

DEMO_PLACEMENTS = "worstfit,bestfit,firstfit,fgd"


def _number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _split(text: str) -> list[str]:
    return [p.strip() for p in text.split(",") if p.strip()]


def split_placements(text: str) -> list[str]:
    """Comma-separated placements, where consecutive ``name=weight`` parts form one
    weighted combination: ``fgd,pwr=200,fgd=800`` -> ``[fgd, pwr=200,fgd=800]``."""
    from gpumosaic.placement.registry import canonical_name

    out: list[str] = []
    for part in _split(text):
        name, eq, weight = part.partition("=")
        part = f"{canonical_name(name)}{eq}{weight}"  # printed in canonical form
        if eq and out and "=" in out[-1]:
            out[-1] = f"{out[-1]},{part}"
        else:
            out.append(part)
    return out


@app.command(
    epilog="Example: gpumosaic compare --cluster v100:4 --workload "
    "gavel:jobs=50,rate=0,milli=spatial --placements strided,bestfit,fgd --seeds 0-9"
)
@user_errors
def compare(
    mode: Annotated[
        str, typer.Option(help="sim (simulate runs) or fill (openb fill replay)")
    ] = "sim",
    placements: Annotated[
        str | None,
        typer.Option(
            help="comma-separated placements (default: worstfit,bestfit,firstfit,fgd; "
            "a policy sweep uses one, default fgd)"
        ),
    ] = None,
    policies: Annotated[
        str | None, typer.Option(help="comma-separated policies: sweep policies x --rates")
    ] = None,
    seeds: Annotated[str, typer.Option(help="e.g. 0-9 or 0,1,2")] = "0-9",
    cluster: Annotated[str, typer.Option(help=CLUSTER_HELP)] = "v100:4",
    workload: Annotated[
        str, typer.Option(help=WORKLOAD_HELP)
    ] = "gavel:jobs=50,rate=0,milli=spatial",
    policy: Annotated[str, typer.Option(help="policy for every run of a placement sweep")] = "fifo",
    rates: Annotated[str, typer.Option(help="jobs/hour for a policy sweep, e.g. 1,2,3")] = "",
    tasks: Annotated[
        str, typer.Option(help="fill mode: openb:NAME or a task CSV")
    ] = "openb:default",
    nodes: Annotated[str, typer.Option(help="fill mode: openb:gpu or a node CSV")] = "openb:gpu",
    inflate: Annotated[float, typer.Option(help="fill mode: stop at this x cluster GPUs")] = 1.3,
    gpus_per_node: Annotated[int, typer.Option(help="GPUs per server for MODEL:COUNT")] = 1,
    backfill: Annotated[
        bool, typer.Option(help="--no-backfill: strict FIFO, stop at the first job that waits")
    ] = True,
    sharing: Annotated[
        list[str] | None,
        typer.Option(
            help="sharing model of the runs: none, capped, measured, nvshare:...; repeat the "
            "option to compare several (--sharing none --sharing nvshare:tq=30)"
        ),
    ] = None,
    mechanism: Annotated[str, typer.Option(help="auto, event, rounds or gandiva")] = "auto",
    background: Annotated[
        str | None,
        typer.Option(
            help="pre-fill the cluster for every run: openb:default[,fraction=0.8] "
            "(see simulate --help)"
        ),
    ] = None,
    out: Annotated[
        Path | None,
        typer.Option(
            help="folder for the CSV and figures (default: runs/compare, runs/compare-fill "
            "or runs/compare-policies, by mode)"
        ),
    ] = None,
    workers: Annotated[int, typer.Option(help="parallel processes (default: all cores)")] = 0,
    json_out: Annotated[bool, typer.Option("--json", help="print results as JSON")] = False,
    executor: Annotated[
        str,
        typer.Option(
            help="local: the table, CSV and plots from worker processes; ray: each run a Ray "
            "task, stored in OUT as it ends (a rerun skips stored runs; gpumosaic report OUT)"
        ),
    ] = "local",
    ray_address: Annotated[
        str | None,
        typer.Option(help="with --executor ray: the cluster to join (default: a local Ray)"),
    ] = None,
    ray_timeout_s: Annotated[
        float,
        typer.Option(help="with --ray-address: give up joining the Ray cluster after this long"),
    ] = 30.0,
    common_jobs: Annotated[
        bool,
        typer.Option(
            "--common-jobs",
            help="average JCTs over the jobs that every compared run (same seed) completed",
        ),
    ] = False,
    overwrite: Annotated[
        bool,
        typer.Option(
            "--overwrite",
            help="replace the runs of another experiment stored in OUT (refused without it)",
        ),
    ] = False,
) -> None:
    """Compare placements (or policies) over seeds: table, CSV and plots."""
    from gpumosaic.experiments.study.file import MAX_RUNS
    from gpumosaic.experiments.sweeps.runs import default_workers, parse_seeds

    if executor not in ("local", "ray"):
        raise unknown_name("executor", executor, ("local", "ray"), field="--executor")
    if mode not in ("sim", "fill"):  # before the experiment file is written
        raise unknown_name("mode", mode, ("sim", "fill"), field="--mode")
    if ray_address is not None and executor != "ray":
        raise InputError("--ray-address needs --executor ray", field="--ray-address")
    check_number(ray_timeout_s, "--ray-timeout-s", above=0, at_most=3600)
    try:
        seed_list = parse_seeds(seeds)
    except ValueError as err:
        raise InputError(str(err), field="--seeds", value=seeds) from None
    if workers < 0 or workers > MAX_WORKERS:
        raise InputError(
            f"must be 1..{MAX_WORKERS}, or 0 for one per core", field="--workers", value=workers
        )
    n_workers = workers if workers > 0 else default_workers()
    check_number(inflate, "--inflate", above=0, at_most=MAX_INFLATE)
    for rate in _split(rates):
        if _number(rate):
            check_number(float(rate), "--rates", above=0, at_most=1e6)
    check_count(len(_split(rates)), MAX_RATES, "rates", "--rates")
    variants = len(_split(policies)) * max(1, len(_split(rates))) if policies else 1
    variants *= len(split_placements(placements or DEMO_PLACEMENTS)) * len(sharing or ["none"])
    check_count(variants * len(seed_list), MAX_RUNS, "runs", "--seeds")
    out = out if out is not None else default_out(mode, policies)
    check_out_dir(out)
    sharings = sharing or ["none"]
    if background is not None and (mode == "fill" or policies is not None):
        raise InputError(
            "background load is for placement comparisons of a job list (the fill mode "
            "and policy sweeps would ignore it)",
            field="--background",
            value=background,
        )
    from gpumosaic.run.description import DEFAULT_PLACEMENT

    if mode == "fill":
        check_placements(split_placements(placements or DEMO_PLACEMENTS))
    elif policies is not None:
        check_policy_sweep(
            _split(policies),
            cluster,
            workload,
            split_placements(placements or DEFAULT_PLACEMENT),
        )
    else:
        check_comparison(
            split_placements(placements or DEMO_PLACEMENTS),
            sharings,
            cluster=cluster,
            workload=workload,
            policy=policy,
            gpus_per_node=gpus_per_node,
            backfill=backfill,
            mechanism=mechanism,
            background=background,
        )
    if common_jobs and (mode == "fill" or policies is not None or executor == "ray"):
        raise InputError(
            "averages over common jobs are for placement comparisons run here (not the fill "
            "mode, a policy sweep or --executor ray)",
            field="--common-jobs",
        )
    from gpumosaic.cli.out_folder import claim_for, locked_out
    from gpumosaic.experiments.study.compare_file import (
        compare_experiment,
        write_compare_experiment,
    )

    options: dict[str, Any] = dict(
        mode=mode,
        background=background,
        seeds=seed_list,
        placements=split_placements(
            placements or (DEFAULT_PLACEMENT if policies is not None else DEMO_PLACEMENTS)
        ),
        policies=None if policies is None else _split(policies),
        cluster=cluster,
        workload=workload,
        policy=policy,
        rates=[float(r) for r in _split(rates) if _number(r)],
        tasks=tasks,
        nodes=nodes,
        inflate=inflate,
        gpus_per_node=gpus_per_node,
        backfill=backfill,
        sharing=sharings,
        mechanism=mechanism,
    )  # fmt: skip  (the same study as a file: gpumosaic run OUT/experiment.toml)
    with locked_out(out):  # every check passed: the folder is made, and held, only now
        claim_for(out, compare_experiment(**options), overwrite)
        written = write_compare_experiment(out, **options)
        if executor == "ray":
            from gpumosaic.cli.compare.ray import compare_on_ray

            compare_on_ray(written, out, n_workers, ray_address, ray_timeout_s, json_out, seeds)
            return
        if mode == "fill":
            from gpumosaic.cli.compare.fill import compare_fill

            labels = split_placements(placements or DEMO_PLACEMENTS)
            compare_fill(labels, seed_list, tasks, nodes, inflate, out, n_workers, json_out)
            return
        if mode != "sim":
            raise InputError("must be sim or fill", field="--mode")
        if policies is None and rates:
            raise InputError(
                "--rates sweeps the load of a policy comparison: add --policies A,B",
                field="--rates",
                value=rates,
            )
        if policies is not None:
            from gpumosaic.cli.compare.policies import compare_policies

            chosen = split_placements(placements or DEFAULT_PLACEMENT)
            if len(chosen) > 1:
                raise InputError(
                    "a policy sweep runs one placement (compare placements without --policies)",
                    field="--placements",
                    value=placements,
                )
            if len(sharings) > 1 or sharings[0] != "none":
                raise InputError(
                    "a policy sweep runs Gavel's rounds with their own sharing (packed pairs, "
                    "fractions): compare sharing models without --policies",
                    field="--sharing",
                    value=",".join(sharings),
                )
            try:
                rate_list = [float(r) for r in _split(rates)]
            except ValueError:
                raise InputError("rates must be numbers", field="--rates") from None
            if not rate_list:
                raise InputError("a policy sweep needs --rates", field="--rates")
            placement = chosen[0]
            compare_policies(
                _split(policies),
                rate_list,
                seed_list,
                cluster,
                workload,
                placement,
                out,
                n_workers,
                json_out,
                gpus_per_node,
            )
            return
        from gpumosaic.cli.compare.placements import compare_placements

        compare_placements(
            split_placements(placements or DEMO_PLACEMENTS),
            sharings,
            seed_list,
            seeds,
            cluster=cluster,
            workload=workload,
            policy=policy,
            gpus_per_node=gpus_per_node,
            backfill=backfill,
            mechanism=mechanism,
            background=background,
            out=out,
            workers=n_workers,
            json_out=json_out,
            common_jobs=common_jobs,
        )


def default_out(mode: str, policies: str | None) -> Path:
    """Each kind of comparison its own default folder: a fill comparison must not write
    over (or mix its runs into) a placement comparison's."""
    if policies is not None:
        return Path("runs/compare-policies")
    return Path("runs/compare-fill") if mode == "fill" else Path("runs/compare")


# The checks below run before the experiment file is written or a run starts, through
# the parsers the runs themselves use (plain Python: a mistake costs a line, not numpy).
