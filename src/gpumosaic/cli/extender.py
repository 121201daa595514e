"""``gpumosaic extender``: the Kubernetes scheduler extender, and ``extender replay``."""

from __future__ import annotations

import errno
import importlib
import json
import logging
import socket
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from gpumosaic.cli.app import WrappingGroup, app, user_errors
from gpumosaic.cli.fill import NODES_HELP, PLACEMENT_HELP, TASKS_HELP
from gpumosaic.cli.progress import counter_bar
from gpumosaic.cli.tables import show as show_table
from gpumosaic.errors import InputError

extender_app = typer.Typer(
    rich_markup_mode=None,  # as the top-level app: help that wraps at 80 columns
    cls=WrappingGroup,
    help="Serve a placement to kube-scheduler as an HTTP extender (filter, prioritize, bind).",
)
app.add_typer(extender_app, name="extender")

SWITCH_INTERVAL_S = 0.001  # see extender(): the loop's wait for the GIL
KUBE_MODULES = ("fastapi", "uvicorn", "httpx", "kubernetes", "prometheus_client", "orjson")


def require_kube_extra() -> None:
    """One line naming the extra when a dependency of the extender is missing."""
    for module in KUBE_MODULES:
        try:
            importlib.import_module(module)
        except ImportError:
            raise InputError(
                f"the extender needs the 'kube' extra ({module} is not installed): "
                "pip install 'gpumosaic[kube]'"
            ) from None


@extender_app.callback(
    invoke_without_command=True,
    epilog="Example: gpumosaic extender --placement fgd --target-workload openb:default",
)
@user_errors
def extender(
    ctx: typer.Context,
    placement: Annotated[str, typer.Option(help=PLACEMENT_HELP)] = "fgd",
    target_workload: Annotated[
        str | None,
        typer.Option(
            help="FGD's target workload: openb:NAME, a task-list CSV or a job list; "
            "default: learned from a sliding window of the pods seen"
        ),
    ] = None,
    cluster: Annotated[
        str | None,
        typer.Option(
            help="standalone mode: nodes from openb:gpu, a node CSV or MODEL:COUNT, binds "
            "recorded in --db (no API server); default: the cluster of the kubeconfig"
        ),
    ] = None,
    db: Annotated[Path, typer.Option(help="SQLite state of the standalone mode")] = Path(
        "gpumosaic-extender.sqlite"
    ),
    kubeconfig: Annotated[
        Path | None, typer.Option(help="kubeconfig file (default: in-cluster, then ~/.kube)")
    ] = None,
    host: Annotated[str, typer.Option(help="address to listen on")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="port to listen on")] = 8888,
    tls_cert: Annotated[Path | None, typer.Option(help="TLS certificate (PEM)")] = None,
    tls_key: Annotated[Path | None, typer.Option(help="TLS private key (PEM)")] = None,
    token: Annotated[
        str,
        typer.Option(
            envvar="GPUMOSAIC_EXTENDER_TOKEN",
            help="bearer token for every route but /healthz and the verbs (kube-scheduler "
            "sends none): /state, /metrics, DELETE /pods, /docs, /redoc, /openapi.json",
        ),
    ] = "",
    seed: Annotated[int, typer.Option(help="seed of the tie-break order and random choices")] = 0,
    window: Annotated[int, typer.Option(help="pods in the learned target workload")] = 2000,
    refresh: Annotated[int, typer.Option(help="new pods between window rebuilds")] = 100,
    url_prefix: Annotated[str, typer.Option(help="path prefix of the verbs")] = "",
    filter_verb: Annotated[str, typer.Option(help="path of filter")] = "filter",
    prioritize_verb: Annotated[str, typer.Option(help="path of prioritize")] = "prioritize",
    bind_verb: Annotated[str, typer.Option(help="path of bind")] = "bind",
    log_level: Annotated[str, typer.Option(help="debug, info, warning, error")] = "info",
) -> None:
    """Serve FGD (or PWR, a weighted mix, any placement) to kube-scheduler."""
    if ctx.invoked_subcommand is not None:
        return
    # The names first, by the parsers the service builds with (plain Python): a mistake
    # is one line without the Kubernetes client, the web server or numpy.
    from gpumosaic.placement.registry import check_placement_for

    check_placement_for(placement)
    if cluster is not None:
        from gpumosaic.workloads.spec import check_cluster

        check_cluster(cluster)
    require_kube_extra()
    if token and not (token.isascii() and token.isprintable() and " " not in token):
        raise InputError("must be printable ASCII without spaces", field="--token")
    if (tls_cert is None) != (tls_key is None):
        raise InputError("give both --tls-cert and --tls-key, or neither", field="--tls-cert")
    # a port in use: one line, before any work is done; closed however the command ends
    with _bind(host, port) as listener:
        import uvicorn

        from gpumosaic.apps.extender.app import EXTENDER_LIMITS, Verbs, create_app
        from gpumosaic.apps.extender.server import settle_heap
        from gpumosaic.apps.extender.service import ExtenderService
        from gpumosaic.apps.extender.target import TargetSource, load_target_jobs
        from gpumosaic.placement.workload import TargetWorkload
        from gpumosaic.runtime.api.http_guard import guarded_options

        fixed = None
        if target_workload is not None:
            fixed = TargetWorkload.from_jobs(load_target_jobs(target_workload))
        target = TargetSource(fixed, window, refresh)
        logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(levelname)s %(message)s")
        watcher = None
        if cluster is not None:
            from gpumosaic.apps.extender.sqlite_store import SqliteBackend
            from gpumosaic.workloads.spec import parse_cluster

            service = ExtenderService(
                SqliteBackend(parse_cluster(cluster), db, cluster), placement, target, seed
            )
        else:
            from gpumosaic.apps.extender.kube import KubeBackend, Watcher

            backend = KubeBackend.connect(kubeconfig)
            service = ExtenderService(backend, placement, target, seed)
            watcher = Watcher(backend, service)
            watcher.start()
        verbs = Verbs(url_prefix, filter_verb, prioritize_verb, bind_verb)
        app_ = create_app(service, verbs, token=token)
        settle_heap()
        # The verbs run on the event loop; binds and releases in threads. When a thread holds
        # the GIL, the loop waits for it up to the switch interval (5 ms by default) before
        # it can answer the next filter; 1 ms bounds that wait (a choice, not a calibration).
        previous_interval = sys.getswitchinterval()
        sys.setswitchinterval(SWITCH_INTERVAL_S)
        try:
            config = uvicorn.Config(
                app_,
                host=host,
                port=port,
                ssl_certfile=None if tls_cert is None else str(tls_cert),
                ssl_keyfile=None if tls_key is None else str(tls_key),
                log_level=log_level.lower(),
                access_log=False,
                **guarded_options(EXTENDER_LIMITS),  # connection limits, timeouts (http_guard)
            )
            uvicorn.Server(config).run(sockets=[listener])
        finally:
            sys.setswitchinterval(previous_interval)
            if watcher is not None:
                watcher.stop()


@extender_app.command(
    "replay",
    epilog="Example: gpumosaic extender replay --tasks openb:default --nodes openb:gpu "
    "--seed 42 --json",
)
@user_errors
def replay_command(
    tasks: Annotated[str, typer.Option(help=TASKS_HELP)] = "openb:default",
    nodes: Annotated[str, typer.Option(help=NODES_HELP)] = "openb:gpu",
    placement: Annotated[str, typer.Option(help=PLACEMENT_HELP)] = "fgd",
    seed: Annotated[int, typer.Option(help="seed of the fill order and of ties")] = 42,
    inflate: Annotated[
        float, typer.Option(help="stop when requested GPUs reach this x cluster GPUs")
    ] = 1.3,
    url: Annotated[
        str | None,
        typer.Option(help="a running extender (default: start one on a free loopback port)"),
    ] = None,
    full_nodes: Annotated[
        bool, typer.Option(help="send full Node objects instead of NodeNames (nodeCacheCapable)")
    ] = False,
    restart_at: Annotated[
        int | None, typer.Option(help="restart the local extender after this many tasks")
    ] = None,
    compare_fill: Annotated[
        bool, typer.Option(help="also run gpumosaic fill and compare decisions")
    ] = True,
    json_out: Annotated[bool, typer.Option("--json", help="print one JSON object")] = False,
) -> None:
    """Play kube-scheduler against an extender over loopback HTTP, task by task in
    ``gpumosaic fill``'s order, and report the allocation rate and verb latencies."""
    from gpumosaic.placement.registry import check_placement_for

    check_placement_for(placement)  # one line without the Kubernetes client or numpy
    require_kube_extra()
    if not inflate > 0:
        raise InputError("must be > 0", field="--inflate")
    if url is not None and restart_at is not None:
        raise InputError("--restart-at needs the local extender (no --url)", field="--restart-at")
    from gpumosaic.apps.extender.replay import replay
    from gpumosaic.run.fill import fill_replay
    from gpumosaic.traces.openb import load_openb_nodes, load_openb_tasks

    cluster = load_openb_nodes(nodes)
    jobs = load_openb_tasks(tasks)
    show = not json_out and sys.stderr.isatty()
    with counter_bar(show, "replaying", 100.0) as update:
        result = replay(
            cluster,
            nodes,
            jobs,
            placement,
            seed,
            inflate,
            url=url,
            node_cache_capable=not full_nodes,
            restart_at=restart_at,
            progress=lambda f: update(100.0 * f),
        )
    summary = {"tasks_spec": tasks, "nodes": nodes, **result.to_json()}
    if compare_fill:
        fill = fill_replay(cluster, jobs, placement, seed, inflate)
        summary["fill_allocation_rate_pct"] = round(fill.final.allocation_rate_pct, 4)
        summary["same_decisions"] = bool(
            fill.num_tasks == result.tasks and (result.placed == ~fill.failed).all()
        )
    if json_out:
        sys.stdout.write(json.dumps(summary) + "\n")
        return
    console = Console()
    table = Table(title=f"extender replay: {result.placement}, seed {seed}, {result.tasks} tasks")
    for column in ("verb", "calls", "p50 ms", "p99 ms"):
        table.add_column(column, justify="right")
    for verb, stats in result.latency_ms.items():
        table.add_row(verb, str(stats["count"]), f"{stats['p50']:.2f}", f"{stats['p99']:.2f}")
    show_table(table, ("verb",), console)
    failed = ", ".join(f"{k}: {v}" for k, v in result.failed_by_stage.items()) or "none"
    console.print(
        f"allocation rate {result.allocation_rate_pct:.2f}% ({result.bound} bound, "
        f"{result.failed} failed: {failed}); {result.elapsed_s:.1f} s"
    )
    if compare_fill:
        verdict = "same decisions" if summary["same_decisions"] else "DIFFERENT decisions"
        console.print(f"gpumosaic fill: {summary['fill_allocation_rate_pct']:.2f}% ({verdict})")


def _bind(host: str, port: int) -> socket.socket:
    """The listening socket, bound before the service is built: a port in use is one
    line and exit 2 (uvicorn's own refusal was six log lines and exit 3)."""
    try:
        return socket.create_server((host, port))
    except OSError as err:
        why = err.strerror or str(err)
        if err.errno == errno.EADDRINUSE:
            why = "address already in use (another extender? pick --port)"
        raise InputError(
            f"cannot listen on {host}:{port}: {why}", field="--port", value=port
        ) from None
