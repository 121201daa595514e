"""What a service takes from the machine before it starts, each refused in one line
naming its option: its Ray (``connect_ray``: join ``--ray-address``, or start a local one
with the ``--cluster`` models), its state file (``open_state``: locked, writable) and its
API's port (``bind_api``: bound before Ray starts)."""

from __future__ import annotations

import logging
import socket
import sqlite3
import threading
from pathlib import Path

from gpumosaic.errors import InputError
from gpumosaic.run.serve_description import ServeDescription
from gpumosaic.runtime.cluster import (
    LiveCluster,
    discover,
    local_ray_resources,
    parse_counts,
    ray_nodes,
)
from gpumosaic.runtime.state.fencing import StateLock
from gpumosaic.runtime.state.store import Store

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
