"""``gpumosaic share daemon|run|ctl|status|metrics``: time-share GPUs between processes."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from gpumosaic.cli.app import WrappingGroup, app, user_errors
from gpumosaic.cli.shown import cell
from gpumosaic.cli.tables import show
from gpumosaic.errors import InputError
from gpumosaic.runtime.share import client, limits
from gpumosaic.runtime.share.daemon import ShareDaemon
from gpumosaic.runtime.share.native import ShareError, check_loadable, library_path
from gpumosaic.runtime.share.sockets import default_socket_dir, socket_path
from gpumosaic.sharing.lock import DEFAULT_TQ_S, AntiThrashing

share_app = typer.Typer(
    rich_markup_mode=None,  # as the top-level app: help that wraps at 80 columns
    cls=WrappingGroup,
    help="Time-share GPUs between unmodified processes (an nvshare-style runtime).",
    no_args_is_help=True,
)
app.add_typer(share_app, name="share")

SocketDir = Annotated[
    Path | None,
    typer.Option("--socket-dir", help="Directory of the per-GPU sockets [default: run-time dir]"),
]
TQ_HELP = f"Time quantum, seconds ({limits.TQ_MIN_S:g} to {limits.TQ_MAX_S:g})"
MODE_HELP = "on (serialize), off (run together), auto (serialize only while working sets overflow)"


def _dir(socket_dir: Path | None) -> Path:
    return socket_dir if socket_dir is not None else default_socket_dir()


def _mode(text: str) -> AntiThrashing:
    try:
        return AntiThrashing(text.lower())
    except ValueError:
        raise InputError(f"--anti-thrashing must be on, off or auto, got {text!r}") from None


def _gpus(text: str) -> list[int]:
    if len(text) > 10_000:
        raise InputError("--gpus is too long")
    try:
        gpus = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise InputError(f"--gpus must be GPU indices like 0,1, got {text!r}") from None
    if not gpus or len(set(gpus)) != len(gpus):
        raise InputError(f"--gpus must be distinct GPU indices >= 0, got {text!r}")
    for g in gpus:
        _gpu(g, "--gpus")
    return gpus


def _gpu(value: int, flag: str = "--gpu") -> int:
    try:
        return limits.gpu_index(value)
    except ValueError as err:
        raise InputError(str(err), field=flag, value=value) from None


@share_app.command(
    "daemon", epilog="Example: gpumosaic share daemon --gpus 0,1 --tq 30 --anti-thrashing auto"
)
@user_errors
def daemon_cmd(
    socket_dir: SocketDir = None,
    gpus: Annotated[str, typer.Option("--gpus", help="GPU indices, one socket each")] = "0",
    tq: Annotated[float, typer.Option("--tq", help=TQ_HELP)] = DEFAULT_TQ_S,
    anti_thrashing: Annotated[str, typer.Option("--anti-thrashing", help=MODE_HELP)] = "auto",
    grace: Annotated[
        float,
        typer.Option(
            "--grace",
            help="Seconds a holder has beyond TQ, after DROP_LOCK, before its lock is revoked",
        ),
    ] = limits.DEFAULT_REVOKE_GRACE_S,
    allow_group: Annotated[
        bool,
        typer.Option(
            "--allow-group", help="Let the daemon's group use the sockets (0660, dir 0750)"
        ),
    ] = False,
    memory_mib: Annotated[
        float | None, typer.Option("--memory-mib", help="GPU memory for auto [default: reported]")
    ] = None,
    metrics_port: Annotated[
        int | None, typer.Option("--metrics-port", help="Serve Prometheus /metrics on 127.0.0.1")
    ] = None,
    event_log: Annotated[
        Path | None, typer.Option("--event-log", help="Append lock events as JSON lines")
    ] = None,
) -> None:
    """Serve one lock per GPU until interrupted."""
    daemon = ShareDaemon(
        _dir(socket_dir),
        _gpus(gpus),
        tq,
        _mode(anti_thrashing),
        memory_mib,
        metrics_port,
        event_log,
        revoke_grace_s=grace,
        allow_group=allow_group,
    )
    where = ", ".join(str(socket_path(daemon.socket_dir, g)) for g in daemon.locks)
    banner = (
        f"share daemon: {where} (TQ {tq:g} s, revoke grace {grace:g} s, "
        f"anti-thrashing {anti_thrashing})"
    )
    asyncio.run(daemon.run(lambda: Console(stderr=True).print(banner, highlight=False)))


@share_app.command(
    "run",
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
    epilog="Example: gpumosaic share run --gpu 0 -- python train.py",
)
@user_errors
def run_cmd(
    ctx: typer.Context,
    socket_dir: SocketDir = None,
    gpu: Annotated[int, typer.Option("--gpu", help="GPU index to share")] = 0,
) -> None:
    """Run CMD under the interposer: gpumosaic share run [--gpu N] -- CMD ..."""
    command = list(ctx.args)
    if not command:
        raise InputError("give the command to run after --, e.g. share run -- python train.py")
    path = socket_path(_dir(socket_dir), _gpu(gpu))
    client.check_daemon(path)
    lib = library_path("interposer")
    check_loadable(lib)
    env = dict(os.environ)
    preload = env.get("LD_PRELOAD", "")
    env["LD_PRELOAD"] = f"{lib}:{preload}" if preload else str(lib)
    env["GPUMOSAIC_SHARE_SOCKET"] = str(path)
    env["CUDA_VISIBLE_DEVICES"] = str(gpu)
    try:
        os.execvpe(command[0], command, env)
    except OSError as err:
        raise ShareError(f"cannot run {command[0]}: {err.strerror}") from None


@share_app.command("ctl", epilog="Example: gpumosaic share ctl --tq 10 --anti-thrashing on")
@user_errors
def ctl_cmd(
    socket_dir: SocketDir = None,
    gpu: Annotated[int | None, typer.Option("--gpu", help="Only this GPU [default: all]")] = None,
    tq: Annotated[float | None, typer.Option("--tq", help=TQ_HELP)] = None,
    anti_thrashing: Annotated[str | None, typer.Option("--anti-thrashing", help=MODE_HELP)] = None,
) -> None:
    """Change the TQ or the anti-thrashing mode of a running daemon (nvsharectl)."""
    if tq is None and anti_thrashing is None:
        raise InputError("give --tq and/or --anti-thrashing")
    mode = None if anti_thrashing is None else _mode(anti_thrashing)
    changed = client.control(_dir(socket_dir), None if gpu is None else _gpu(gpu), tq, mode)
    print(f"updated GPU {', '.join(map(str, changed))}")


@share_app.command("status", epilog="Example: gpumosaic share status --json")
@user_errors
def status_cmd(
    socket_dir: SocketDir = None,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per GPU")] = False,
) -> None:
    """Holders, waiters, TQ, hand-overs and time held per process."""
    gpus = client.status(_dir(socket_dir))
    if as_json:
        json.dump(gpus, sys.stdout, indent=2)
        sys.stdout.write("\n")
        return
    table = Table(title="gpumosaic share")
    for col in (
        "GPU",
        "TQ s",
        "anti-thrashing",
        "serialized",
        "hand-overs",
        "process",
        "state",
        "held s",
    ):
        table.add_column(col)
    for g in gpus:
        holder = g["holder"]
        holder_id = holder["id"] if isinstance(holder, dict) else None
        waiting = {w["id"]: i for i, w in enumerate(g["waiting"])}
        head = [
            str(g["gpu"]),
            f"{g['tq_s']:g}",
            str(g["anti_thrashing"]),
            str(g["serialized"]),
            str(g["handovers"]),
        ]
        clients = g["clients"] or [None]
        for i, c in enumerate(clients):
            cells = head if i == 0 else [""] * len(head)
            if c is None:
                table.add_row(*map(cell, cells), "-", "-", "-")
                continue
            state = (
                "holds"
                if c["id"] == holder_id
                else (
                    f"waits #{waiting[c['id']] + 1}"
                    if c["id"] in waiting
                    else "runs"
                    if not g["serialized"]
                    else "idle"
                )
            )
            table.add_row(
                *map(cell, cells), cell(f"{c['name']} ({c['pid']})"), state, f"{c['held_s']:.1f}"
            )
    show(table, ("GPU",))


@share_app.command("metrics", epilog="Example: gpumosaic share metrics")
@user_errors
def metrics_cmd(socket_dir: SocketDir = None) -> None:
    """Print the daemon's Prometheus metrics (also served by daemon --metrics-port)."""
    sys.stdout.write(client.metrics(_dir(socket_dir)))


@share_app.command(
    "device-plugin", epilog="Example: gpumosaic share device-plugin --gpus 0,1 --slots 10"
)
@user_errors
def device_plugin_cmd(
    socket_dir: SocketDir = None,
    gpus: Annotated[str, typer.Option("--gpus", help="GPU indices served by the daemon")] = "0",
    slots: Annotated[int, typer.Option("--slots", help="Schedulable slots per GPU")] = 10,
    lib: Annotated[
        Path | None,
        typer.Option("--lib", help="Host path of the interposer [default: this install's]"),
    ] = None,
    plugin_dir: Annotated[
        Path, typer.Option("--plugin-dir", help="The kubelet's device-plugin directory")
    ] = Path("/var/lib/kubelet/device-plugins"),
    resource: Annotated[str, typer.Option("--resource", help="Extended resource name")] = (
        "gpumosaic.io/share"
    ),
) -> None:
    """Advertise SLOTS gpumosaic.io/share slots per GPU to the kubelet (gRPC device plugin)."""
    from gpumosaic.runtime.share.deviceplugin import SharePlugin, SlotPlan

    if not 1 <= slots <= limits.SLOTS_MAX:
        raise InputError(f"--slots must be between 1 and {limits.SLOTS_MAX}, got {slots}")
    plan = SlotPlan(tuple(_gpus(gpus)), slots, _dir(socket_dir), lib or library_path())
    plugin = SharePlugin(plan, plugin_dir, resource)
    banner = f"device plugin: {slots} x {len(plan.gpus)} {resource} slots via {plugin_dir}"
    try:
        plugin.serve_forever(lambda: Console(stderr=True).print(banner, highlight=False))
    except KeyboardInterrupt:
        plugin.stop()
