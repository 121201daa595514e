"""What a service takes from the machine before it starts, each refused in one line
naming its option: its Ray (``connect_ray``: join ``--ray-address``, or start a local one
with the ``--cluster`` models) or its Slurm (``connect_slurm``, ``slurm_executor``), its
state file (``open_state``: locked, writable) and its API's port (``bind_api``: bound
before Ray starts)."""

from __future__ import annotations

import logging
import socket
import sqlite3
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from gpumosaic.errors import InputError
from gpumosaic.run.serve_description import ServeDescription
from gpumosaic.runtime.cluster import (
    LiveCluster,
    RayNode,
    discover,
    local_ray_resources,
    parse_counts,
    ray_nodes,
)
from gpumosaic.runtime.executors.contract import Executor
from gpumosaic.runtime.jobs.submission import JobSubmission
from gpumosaic.runtime.leases import LeaseTable
from gpumosaic.runtime.state.fencing import StateLock
from gpumosaic.runtime.state.store import Store
from gpumosaic.runtime.supervisor.nodes import NodeWatcher

if TYPE_CHECKING:
    from gpumosaic.runtime.executors.slurm import SlurmCommands as SlurmCommandsLike
    from gpumosaic.runtime.executors.slurm import SlurmExecutor

LOCAL_RAY_START_S = 120.0  # the least time a local Ray may take to start (not a measurement)


def connect_ray(config: ServeDescription, stop: threading.Event | None = None) -> LiveCluster:
    """Join ``--ray-address``, use an already connected Ray, or start a local one with
    the ``--cluster`` models as logical GPUs; then read the cluster off Ray. Bounded by
    ``--ray-timeout-s`` and ended early by ``stop`` (``ray_connect``)."""
    import ray

    from gpumosaic.runtime.executors.ray_connect import bounded_init, init_local_ray, use_token_file

    declared = parse_counts(config.cluster) if config.cluster else None
    if not ray.is_initialized():
        if config.ray_token_file:
            use_token_file(config.ray_token_file)
        if config.ray_address:
            address = config.ray_address

            def init() -> None:
                ray.init(address=address, logging_level=logging.ERROR, log_to_driver=False)
        else:
            if declared is None:
                raise InputError(
                    "local Ray needs the GPU models: --cluster MODEL:COUNT,... (e.g. v100:2,k80:2)",
                    field="--cluster",
                )
            num_gpus, resources = local_ray_resources(declared)

            def init() -> None:
                init_local_ray(  # loopback only
                    num_gpus=num_gpus,
                    resources=resources,
                    logging_level=logging.ERROR,
                    log_to_driver=False,
                )

        bounded_init(
            init,
            address=config.ray_address,
            # Starting a local Ray takes ~10 s on an idle laptop, far more on a loaded one.
            timeout_s=config.ray_timeout_s
            if config.ray_address
            else max(config.ray_timeout_s, LOCAL_RAY_START_S),
            stop=stop or threading.Event(),
            log_path=state_dir(config) / "ray-connect.log",
            shutdown=ray.shutdown,
        )
    return discover(ray_nodes(ray.nodes()), declared)


def slurm_commands(config: ServeDescription) -> SlurmCommandsLike:
    from gpumosaic.runtime.executors.slurm import SlurmCommands

    return SlurmCommands(config.slurm_conf)


def connect_slurm(config: ServeDescription) -> LiveCluster:
    """``--executor slurm``: the cluster as Slurm has it (its nodes that are up, of
    ``--slurm-partition`` when given, and their typed GRES GPUs), read through
    ``SLURM_CONF`` (``--slurm-conf``). A Slurm that does not answer is one line."""
    import os

    from gpumosaic.runtime.executors.slurm import SlurmError, read_cluster

    conf = config.slurm_conf or os.environ.get("SLURM_CONF")
    if conf and not Path(conf).is_file():  # Slurm's commands would retry it for 30 s
        flag = "--slurm-conf" if config.slurm_conf else "SLURM_CONF"
        raise InputError("no such file", field=flag, value=conf)
    try:
        cluster, _ = read_cluster(slurm_commands(config), config.slurm_partition)
    except SlurmError as err:
        raise InputError(f"cannot read the cluster from Slurm: {err}", field="--executor") from None
    return cluster


def slurm_executor(config: ServeDescription, data_dir: Path) -> SlurmExecutor:
    """``--executor slurm``: leases as Slurm batch jobs (runtime/executors/slurm)."""
    from gpumosaic.runtime.executors.slurm import SlurmExecutor as Executor
    from gpumosaic.runtime.executors.slurm.cluster import gres_types, read_nodes

    commands = slurm_commands(config)
    return Executor(
        data_dir,
        gres_types(read_nodes(commands, config.slurm_partition)),
        commands=commands,
        partition=config.slurm_partition,
        start_timeout_s=config.start_timeout_s,
        grace_s=config.grace_s,
    )


def slurm_nodes_lister(config: ServeDescription) -> Callable[[], Sequence[RayNode]]:
    """The Slurm nodes that are up, for the node watcher."""
    from gpumosaic.runtime.executors.slurm import slurm_membership

    commands, partition = slurm_commands(config), config.slurm_partition
    return lambda: slurm_membership(commands, partition)


def executor_for(
    config: ServeDescription, cluster: LiveCluster, table: LeaseTable, data_dir: Path
) -> Executor:
    """The service's executor: Slurm's (``--executor slurm``), Ray's warm launchers
    (``--warm-launchers``) or Ray's."""
    if config.executor == "slurm":
        return slurm_executor(config, data_dir)
    if config.warm_launchers:
        from gpumosaic.runtime.executors.warm_ray import WarmRayExecutor

        warm = WarmRayExecutor(wake=table.changed)
        warm.warm(sorted({(s.ray_node_id, s.ip) for s in cluster.slots}))
        return warm
    from gpumosaic.runtime.executors.ray import RayExecutor

    return RayExecutor(config.start_timeout_s)


def node_watcher(config: ServeDescription, cluster: LiveCluster, every_s: float) -> NodeWatcher:
    """Who follows the nodes: Ray's membership, or Slurm's nodes that are up."""
    if config.executor == "slurm":
        return NodeWatcher(cluster, list_nodes=slurm_nodes_lister(config), every_s=every_s)
    return NodeWatcher(cluster, every_s=every_s)


ADOPT_POLL_S = 0.5  # how often partition --slurm-partition's jobs are listed (wall seconds)


def start_adoption(
    config: ServeDescription,
    store: Store,
    clock: Callable[[], float],
    check_fits: Callable[[JobSubmission], tuple[str, str] | None],
    stop: threading.Event,
) -> threading.Thread | None:
    """``--executor slurm --slurm-partition P``: a thread that adopts the jobs users
    submit to ``P`` with sbatch (runtime/executors/slurm/adopt.py); None without it."""
    if config.executor != "slurm" or not config.slurm_partition:
        return None
    from gpumosaic.runtime.executors.slurm import SlurmError
    from gpumosaic.runtime.executors.slurm.adopt import SlurmAdopter

    adopter = SlurmAdopter(
        store,
        slurm_commands(config),
        config.slurm_partition,
        clock,
        config.max_retries,
        check_fits,
    )

    def loop() -> None:
        while not stop.is_set():
            try:
                adopter.poll()
            except SlurmError as err:  # Slurm did not answer: said, then tried again
                store.event(clock(), None, "slurm_unreachable", str(err)[:300])
            stop.wait(ADOPT_POLL_S)

    thread = threading.Thread(target=loop, name="gpumosaic-slurm-adopt", daemon=True)
    thread.start()
    return thread


def state_dir(config: ServeDescription) -> Path:
    state = Path(config.state)
    return state.parent if state.parent != Path("") else Path(".")


def open_state(config: ServeDescription) -> tuple[StateLock, Store]:
    """The state file, locked for this process and checked writable; a second service,
    a damaged or a read-only file is one ``InputError`` line naming ``--state``."""
    path = Path(config.state)
    if path.exists() and not path.is_file():
        raise InputError("is not a file", field="--state", value=config.state)
    lock = StateLock.acquire(path)
    try:
        store = Store(path)
    except sqlite3.Error as err:
        lock.release()
        raise InputError(
            f"cannot open it as a gpumosaic state file: {err}", field="--state", value=config.state
        ) from None
    try:
        store.probe_write()
    except sqlite3.Error as err:
        store.close()
        lock.release()
        raise InputError(f"cannot write it: {err}", field="--state", value=config.state) from None
    return lock, store


def bind_api(config: ServeDescription) -> socket.socket:
    """The API's listening socket, bound now (before Ray starts), so that a port in use
    is one line and no work is done."""
    try:
        return socket.create_server((config.host, config.port))
    except OSError as err:
        why = err.strerror or str(err)
        if err.errno == 98:  # EADDRINUSE
            why = "address already in use (another gpumosaic serve? pick --port)"
        raise InputError(
            f"cannot listen on {config.host}:{config.port}: {why}",
            field="--port",
            value=config.port,
        ) from None
