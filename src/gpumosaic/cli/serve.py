"""``gpumosaic serve``: a mechanism (Gavel's rounds, or Gandiva) as a service executing
jobs on Ray, described by ``ServeDescription`` (the run description plus the service's
own fields)."""

from __future__ import annotations

import os
import signal
import sys
import threading
from typing import Annotated

import typer
from rich.console import Console

from gpumosaic.cli.app import app, err_console, user_errors
from gpumosaic.mode_defaults import RESOLVE_INTERVAL_S


@app.command(
    epilog="Example: gpumosaic serve --cluster v100:2,k80:2 --policy max_min_fairness_perf "
    "--placement fgd --round-s 360"
)
@user_errors
def serve(
    policy: Annotated[
        str | None,
        typer.Option(
            help="as simulate --policy: a Gavel policy for the rounds (default "
            "max_min_fairness_perf), a queue order for gandiva (default fifo)"
        ),
    ] = None,
    placement: Annotated[
        str | None,
        typer.Option(help="fgd, pwr, bestfit, strided, ... (default fgd; gandiva: affinity)"),
    ] = None,
    round_s: Annotated[float, typer.Option(help="round length in seconds")] = 360.0,
    ray_address: Annotated[
        str | None, typer.Option(help="join this Ray cluster (default: start a local one)")
    ] = None,
    cluster: Annotated[
        str | None,
        typer.Option(help="MODEL:COUNT,... GPU models (logical on local Ray, e.g. v100:2,k80:2)"),
    ] = None,
    state: Annotated[str, typer.Option(help="SQLite state file")] = "gpumosaic-state/state.db",
    host: Annotated[str, typer.Option(help="API address (non-loopback needs --token)")] = (
        "127.0.0.1"
    ),
    port: Annotated[int, typer.Option(help="API port (0: any free port)")] = 8470,
    token: Annotated[
        str, typer.Option(envvar="GPUMOSAIC_TOKEN", help="bearer token the API requires")
    ] = "",
    grace_s: Annotated[float, typer.Option(help="SIGTERM -> SIGKILL grace period")] = 10.0,
    max_retries: Annotated[int, typer.Option(help="retries of a failing job")] = 2,
    resolve_interval_s: Annotated[
        float,
        typer.Option(
            help="least time between policy solves (live default 0: whenever jobs change; "
            "simulate's is 1920)"
        ),
    ] = RESOLVE_INTERVAL_S.serve,
    target_workload: Annotated[
        str | None, typer.Option(help="job list whose shapes FGD keeps room for")
    ] = None,
    seed: Annotated[int, typer.Option(help="seed of every random choice")] = 0,
    start_timeout_s: Annotated[
        float, typer.Option(help="a lease Ray cannot start by then goes back to the queue")
    ] = 120.0,
    time_scale: Annotated[
        float,
        typer.Option(
            help="job seconds per wall second: rounds, grants and durations run this much "
            "faster while every record stays in job time (docs/live.md, Time scale)"
        ),
    ] = 1.0,
    warm_launchers: Annotated[
        bool,
        typer.Option(
            help="one launcher actor per Ray node starts the jobs (a process start per lease, "
            "not an actor start; docs/live.md, Warm launchers)"
        ),
    ] = False,
    ray_timeout_s: Annotated[
        float, typer.Option(help="give up connecting to (or starting) Ray after this long")
    ] = 30.0,
    ray_token_file: Annotated[
        str | None,
        typer.Option(help="the Ray cluster's auth token (a head with RAY_AUTH_MODE=token)"),
    ] = None,
    sharing: Annotated[
        str | None,
        typer.Option(
            help="time-share fractional jobs: nvshare:tq=S[,anti_thrashing=auto][,mem_cap=on] "
            "(docs/share.md)"
        ),
    ] = None,
    mechanism: Annotated[
        str,
        typer.Option(
            help="rounds (Gavel's leased rounds), or gandiva[:key=value,...] (time slicing, "
            "packing, migration; as simulate --mechanism gandiva:...)"
        ),
    ] = "rounds",
    job_user: Annotated[
        str,
        typer.Option(
            help="run every job as this OS user (the service runs as root); docs/live.md, "
            "Authentication and threat model"
        ),
    ] = "",
    token_file: Annotated[
        str | None, typer.Option(help="read the bearer token from this file")
    ] = None,
    token_fd: Annotated[int | None, typer.Option(hidden=True)] = None,
    executor: Annotated[
        str,
        typer.Option(
            help="ray (default), or slurm: the cluster and the jobs are Slurm's, read through "
            "SLURM_CONF (no --cluster; docs/slurm.md)"
        ),
    ] = "ray",
    slurm_conf: Annotated[
        str | None, typer.Option(help="--executor slurm: the slurm.conf (default: SLURM_CONF)")
    ] = None,
    slurm_partition: Annotated[
        str | None,
        typer.Option(help="--executor slurm: schedule this partition's nodes (default: all)"),
    ] = None,
) -> None:
    """Run jobs on GPUs in leased rounds (Gavel's physical mode on Ray); Ctrl-C stops."""
    from gpumosaic.runtime.token_handoff import reexec_without_token, token_from

    token = token_from(token, token_file, token_fd)
    reexec_without_token(token)  # the token leaves our environment and argv (no return)
    # The description first (plain Python and pydantic): a mistake is one line, refused
    # by the checks simulate runs, without the service's imports (numpy, Ray, uvicorn).
    from gpumosaic.run.serve_description import ServeDescription

    config = ServeDescription(
        policy=policy,
        placement=placement,
        round_s=round_s,
        resolve_interval_s=resolve_interval_s,
        grace_s=grace_s,
        max_retries=max_retries,
        state=state,
        host=host,
        port=port,
        token=token,
        ray_address=ray_address,
        cluster=cluster,
        seed=seed,
        target_workload=target_workload,
        start_timeout_s=start_timeout_s,
        time_scale=time_scale,
        warm_launchers=warm_launchers,
        ray_timeout_s=ray_timeout_s,
        ray_token_file=ray_token_file,
        sharing=sharing,
        mechanism=mechanism,
        job_user=job_user,
        executor=executor,
        slurm_conf=slurm_conf,
        slurm_partition=slurm_partition,
    )
    # Every flag is valid (ServeDescription checks them all, plain Python): now the service.
    from gpumosaic.run.serve import (
        Service,
        bind_api,
        check_names,
        connect_ray,
        connect_slurm,
        open_state,
    )
    from gpumosaic.runtime.executors.ray_connect import ConnectInterrupted

    check_names(config)
    state_held = open_state(config)  # one service per state file: refused here, at once
    listener = bind_api(config)  # a port in use: refused here, before Ray starts
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):  # honoured while Ray connects too
        signal.signal(sig, lambda *_: stop.set())
    slurm = config.executor == "slurm"
    if not slurm:
        import ray

    embedded = not slurm and not ray.is_initialized() and ray_address is None
    try:
        # --executor slurm: the cluster as Slurm has it (a Slurm mistake is one line)
        live = connect_slurm(config) if slurm else connect_ray(config, stop)
    except ConnectInterrupted as err:
        err_console.print(f"gpumosaic serve: {err}", highlight=False, soft_wrap=True)
        sys.stderr.flush()
        os._exit(130)  # Ray's half-made connection must not hold the exit
    except Exception as err:
        from gpumosaic.errors import InputError

        if isinstance(err, InputError):
            err_console.print(f"[red]error:[/red] {err}", highlight=False, soft_wrap=True)
            sys.stderr.flush()
            os._exit(2)
        raise
    service = Service(config, live, state=state_held, listener=listener)
    service.start()
    models = ", ".join(f"{n} x{c}" for n, c in live.spec.gpus_per_model().items())
    run = config.decisions()
    how = (
        f"{run.policy} + {run.resolved_placement()}, rounds of {round_s:g} s"
        if not config.gandiva
        else f"Gandiva ({mechanism}, {run.policy} + {run.resolved_placement()})"
    ) + (f" at time scale {time_scale:g}" if time_scale != 1 else "")
    Console(stderr=True).print(
        f"gpumosaic serve: {service.url} ({how}, {models}; state {state})",
        highlight=False,
    )
    print(service.url, flush=True)
    for sig in (signal.SIGINT, signal.SIGTERM):  # after ray.init, which installs its own
        signal.signal(sig, lambda *_: service.request_stop())
    if stop.is_set():
        service.request_stop()
    failed: BaseException | None = None
    try:
        service.wait()
    except Exception as err:  # the round loop died: one line, not a traceback
        failed = err
    finally:
        service.stop()
        if embedded:
            import ray

            ray.shutdown()
    if failed is not None:
        err_console.print(
            f"[red]gpumosaic serve stopped:[/red] {type(failed).__name__}: {failed}",
            highlight=False,
            soft_wrap=True,
        )
        raise typer.Exit(1)
