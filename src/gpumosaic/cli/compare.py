"""``gpumosaic compare``: many runs on the same workload, one table and one figure.

Modes: ``sim`` (placements x seeds through ``simulate``), ``fill`` (the FGD/PWR
fill-the-cluster replay of Alibaba openb) and, when ``--policies`` is given, a Gavel-style
sweep of policies x arrival rates x seeds.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from gpumosaic.cli.app import (
    MAX_INFLATE,
    MAX_WORKERS,
    app,
    check_number,
    check_out_dir,
    err_console,
    user_errors,
)
from gpumosaic.cli.simulate import CLUSTER_HELP, WORKLOAD_HELP
from gpumosaic.errors import InputError, unknown_name

if TYPE_CHECKING:
    from gpumosaic.experiments.runner import RunRequest
    from gpumosaic.experiments.sweeps.runs import SweepRun

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
) -> None:
    """Compare placements (or policies) over seeds: table, CSV and plots."""
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
            check_number(float(rate), "--rates", above=0)
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
    if background is not None and executor == "ray":
        raise InputError(
            "--background is not part of a comparison's experiment file yet: run it with "
            "--executor local",
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
    out.mkdir(parents=True, exist_ok=True)  # every check passed: the first thing made
    from gpumosaic.experiments.study.compare_file import write_compare_experiment

    written = write_compare_experiment(
        out,
        mode=mode,
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
    if common_jobs and (mode == "fill" or policies is not None or executor == "ray"):
        raise InputError(
            "averages over common jobs are for placement comparisons run here (not the fill "
            "mode, a policy sweep or --executor ray)",
            field="--common-jobs",
        )
    if executor == "ray":
        _compare_on_ray(written, out, n_workers, ray_address, ray_timeout_s, json_out, seeds)
        return
    if mode == "fill":
        from gpumosaic.cli.compare_fill import compare_fill

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
        from gpumosaic.cli.compare_policies import compare_policies

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
        )
        return
    # The simulator's comparison: its imports only now (the fill mode and --help skip them).
    from rich.console import Console

    from gpumosaic.cli.compare_table import (
        different_jobs_warning,
        identical_notes,
        print_table,
        table_rows,
    )
    from gpumosaic.experiments.runner import RunRequest
    from gpumosaic.experiments.sweeps.runs import write_runs_csv
    from gpumosaic.fallbacks import Fallbacks
    from gpumosaic.workloads.spec import parse_cluster

    placement_list = split_placements(placements or DEMO_PLACEMENTS)
    # One row per (placement, sharing model); labels name the sharing model only when
    # several are compared.
    cells = [(p, m) for m in sharings for p in placement_list]
    label_of = {cell: cell[0] if len(sharings) == 1 else f"{cell[0]} + {cell[1]}" for cell in cells}
    requests = [
        RunRequest(
            cluster=cluster,
            workload=workload,
            policy=policy,
            placement=p,
            seed=s,
            gpus_per_node=gpus_per_node,
            backfill=backfill,
            sharing=m,
            mechanism=mechanism,
            background=background,
        )
        for p, m in cells
        for s in seed_list
    ]
    runs = _run_with_progress(requests, n_workers, enabled=not json_out)
    fallbacks = Fallbacks.total(r.summary.fallbacks for r in runs)
    if fallbacks:
        warning = fallbacks.warning()
        err_console.print(f"[yellow]warning:[/yellow] {warning}", highlight=False, soft_wrap=True)
    labels = [label_of[cell] for cell in cells]
    by_label = {
        label_of[cell]: [r for r in runs if (r.request.placement, r.request.sharing) == cell]
        for cell in cells
    }
    rows = table_rows(by_label, common_jobs)
    if differ := different_jobs_warning(by_label):
        err_console.print(f"[yellow]warning:[/yellow] {differ}", highlight=False, soft_wrap=True)
    write_runs_csv(runs, out / "runs.csv")
    jcts = {p: [r.jcts_s for r in by_label[p]] for p in labels}
    avgs = {p: [r.summary.avg_jct_s for r in by_label[p]] for p in labels}
    from gpumosaic.experiments.plots.runs import plot_comparison, plot_timelines  # matplotlib: late

    scenario = f"{policy} on {cluster}, {workload}"
    if len(sharings) == 1 and sharings[0] != "none":  # several: each label names its own
        scenario += f", sharing {sharings[0]}"
    figure = plot_comparison(jcts, avgs, out / "compare.png", scenario, seeds=seed_list)
    # Over time, per placement: the first seed's run (seeds differ only in their draws).
    first = {p: by_label[p][0] for p in labels}
    total_milli = parse_cluster(cluster, gpus_per_node).num_gpus * 1000.0
    plot_timelines(
        {p: r.timeline for p, r in first.items()},
        total_milli,
        out / "timeline.png",
        title=scenario,
        seed=seed_list[0],
    )
    (out / "table.json").write_text(json.dumps(rows, indent=2) + "\n")
    if json_out:
        kernels = sorted({r.kernels for r in runs})  # aot, jit, aot+jit or none, per run
        payload = {"rows": rows, "csv": str(out / "runs.csv"), "figure": str(figure)}
        print(json.dumps({**payload, "kernels": kernels}))
    else:
        title = f"{policy} on {cluster}, {workload}, seeds {seeds}"
        if common_jobs:
            title += " (JCTs over the jobs every run completed)"
        print_table(rows, title)
        for note in identical_notes(by_label, parse_cluster(cluster, gpus_per_node)):
            Console().print(note, highlight=False, soft_wrap=True)
        Console().print(f"wrote {out / 'runs.csv'}, {figure}, {out / 'timeline.png'}")


def default_out(mode: str, policies: str | None) -> Path:
    """Each kind of comparison its own default folder: a fill comparison must not write
    over (or mix its runs into) a placement comparison's."""
    if policies is not None:
        return Path("runs/compare-policies")
    return Path("runs/compare-fill") if mode == "fill" else Path("runs/compare")


# The checks below run before the experiment file is written or a run starts, through
# the parsers the runs themselves use (plain Python: a mistake costs a line, not numpy).


def check_placements(placements: list[str]) -> None:
    """Every ``--placements`` entry by the placement grammar."""
    from gpumosaic.run.parts import check_placement_for

    for placement in placements:
        check_placement_for(placement, field="--placements")


def check_comparison(placements: list[str], sharings: list[str], **common: Any) -> None:
    """Every (placement, sharing) run's description, validated as ``simulate`` validates
    it, and the cluster and workload they share."""
    from gpumosaic.run.description import RunDescription

    description = None
    for sharing in sharings:
        for placement in placements:
            try:
                description = RunDescription(placement=placement, sharing=sharing, **common)
            except InputError as err:
                if err.field != "--placement":
                    raise
                raise InputError(err.message, field="--placements", value=err.value) from None
    if description is not None:
        description.check_inputs()


def check_policy_sweep(
    policies: list[str], cluster: str, workload: str, placements: list[str]
) -> None:
    """A policy sweep's names: each policy, the cluster, the generated workload's kind
    (its rate is each point's), the placement."""
    from gpumosaic.run.parts import check_allocation_policy
    from gpumosaic.workloads.spec import check_cluster

    if not policies:
        raise InputError("no policies given", field="--policies")
    for name in policies:
        check_allocation_policy(name, field="--policies")
    if workload.partition(":")[0] not in ("gavel", "gavel-stream"):
        raise InputError(
            "a policy sweep needs a generated workload (gavel:... or gavel-stream:...)",
            field="--workload",
        )
    check_cluster(cluster)
    check_placements(placements)


def _run_with_progress(requests: list[RunRequest], workers: int, enabled: bool) -> list[SweepRun]:
    from gpumosaic.cli.progress import counter_bar
    from gpumosaic.experiments.sweeps.runs import run_sweep

    with counter_bar(enabled, "runs", len(requests)) as update:
        return run_sweep(requests, workers, lambda done, _total: update(done))


def _compare_on_ray(
    experiment: Path,
    out: Path,
    workers: int,
    address: str | None,
    timeout_s: float,
    json_out: bool,
    seeds_text: str,
) -> None:
    """The comparison as the study it wrote (``experiment``), through the study executor:
    a Ray task per run, results streamed into OUT's store as they end, stored runs skipped."""
    import sys

    from rich.console import Console

    from gpumosaic.cli.progress import counter_bar
    from gpumosaic.experiments.study.execute import execute
    from gpumosaic.experiments.study.file import load_experiment

    study = load_experiment(experiment)
    joined = False
    if address is not None:
        try:
            import ray
        except ImportError:
            raise InputError(
                "--executor ray needs Ray: pip install 'gpumosaic[ray]'", field="--executor"
            ) from None
        if not ray.is_initialized():
            join_ray(address, timeout_s)
            joined = True
    try:
        with counter_bar(not json_out and sys.stderr.isatty(), "runs") as update:
            outcome = execute(study, out, "ray", workers, lambda done, total: update(done, total))
    finally:
        if joined:
            ray.shutdown()
    shown: dict[str, object] = {}
    if study.kind.name == "simulate":  # the table and figures of the local executor
        from gpumosaic.cli.compare_ray import show_stored_comparison

        shown = show_stored_comparison(study, out, seeds_text, json_out)
    payload = {
        **shown,
        "out": str(out),
        "planned": outcome.planned,
        "skipped": outcome.skipped,
        "ran": outcome.ran,
        "failed": [{"run_id": f.run_id, "error": f.error} for f in outcome.failed],
        "elapsed_s": round(outcome.elapsed_s, 3),
    }
    if json_out:
        typer.echo(json.dumps(payload))
    else:
        Console().print(
            f"{outcome.planned} runs planned, {outcome.skipped} already stored, "
            f"{outcome.ran} ran on Ray in {outcome.elapsed_s:.1f} s -> {out}\n"
            f"next: gpumosaic report {out}"
        )
    if outcome.failed:
        for error in dict.fromkeys(f.error for f in outcome.failed):
            err_console.print(f"[red]error:[/red] run(s) failed: {error}", highlight=False)
        raise typer.Exit(1)


def join_ray(address: str, timeout_s: float) -> None:
    """``ray.init(address)``, bounded and interruptible: Ray retries an unreachable head
    for many minutes and does not hear SIGTERM meanwhile. A line says what it waits for;
    a head that does not answer in ``timeout_s`` (or Ctrl-C / SIGTERM) ends the command
    with one line (exit 2; interrupted: 130 / 143)."""
    import signal
    import socket
    import threading
    import time

    import ray

    err_console.print(
        f"joining the Ray cluster at {address} (up to {timeout_s:g} s; --ray-timeout-s; "
        "Ctrl-C stops) ...",
        highlight=False,
        soft_wrap=True,
    )
    deadline = time.monotonic() + timeout_s
    host, _, port = address.removeprefix("ray://").rpartition(":")
    if host and port.isdigit():  # a plain HOST:PORT: nothing listening fails at once
        try:
            socket.create_connection((host, int(port)), timeout=timeout_s).close()
        except OSError as err:
            reason = err.strerror or type(err).__name__
            raise InputError(
                f"cannot reach a Ray head there ({reason})", field="--ray-address", value=address
            ) from None
    failure: list[BaseException] = []

    def connect() -> None:
        try:
            ray.init(address=address, log_to_driver=False, configure_logging=False)
        except BaseException as err:  # reported by the waiting thread
            failure.append(err)

    # A daemon thread: one that never returns cannot hold the process at exit.
    thread = threading.Thread(target=connect, name="ray-join", daemon=True)
    stop: list[int] = []
    previous = signal.getsignal(signal.SIGTERM)
    in_main = threading.current_thread() is threading.main_thread()
    if in_main:
        signal.signal(signal.SIGTERM, lambda signum, _frame: stop.append(signum))
    try:
        thread.start()
        while thread.is_alive() and not stop and time.monotonic() < deadline:
            thread.join(0.2)  # short waits: Ctrl-C (KeyboardInterrupt) is heard at once
    except KeyboardInterrupt:
        stop.append(signal.SIGINT)
    finally:
        if in_main:
            signal.signal(signal.SIGTERM, previous)
    if stop:
        err_console.print("[red]error:[/red] --ray-address: interrupted while joining Ray")
        raise typer.Exit(128 + stop[0])
    if thread.is_alive():
        raise InputError(
            f"no Ray head answered within {timeout_s:g} s (is it running? is this its GCS "
            "address, HOST:6379 by default?)",
            field="--ray-address",
            value=address,
        )
    if failure:
        raise InputError(
            f"cannot join the Ray cluster: {type(failure[0]).__name__}: {failure[0]}",
            field="--ray-address",
            value=address,
        )
