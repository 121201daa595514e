"""Connecting to Ray, bounded: ``--ray-timeout-s``, interruptible, one line when it fails.

``ray.init`` against an address that never answers retries for minutes and, running in
the main thread, keeps SIGTERM from ending the process. Here it runs in a helper thread
while the caller waits at most ``timeout_s`` and watches a stop event (set by SIGTERM or
Ctrl-C); a plain ``host:port`` address is first probed with a TCP connect, so a refused
or unroutable address is one line within the timeout. While Ray connects, its C++ core's
retry warnings (written straight to file descriptor 2) go to ``ray-connect.log`` next to
the state, and are read back to tell an authentication failure from silence.

A local instance (``init_local_ray``) is loopback only: Ray on Linux replaces a
``_node_ip_address`` of 127.0.0.1 by the machine's own address and its daemons then listen
on every interface; with its single-machine switch (``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0``,
read by Ray's services and inherited by its daemons and workers) it keeps 127.0.0.1 and
they listen there alone. Such a head takes no second node (``ray start --address`` refuses
to join it): a cluster of several nodes is started with ``ray start`` and joined by address.

Token authentication (``RAY_AUTH_MODE=token``, what ``ray start`` uses when a token is
set up): ``--ray-token-file PATH`` (or ``RAY_AUTH_TOKEN`` / ``RAY_AUTH_TOKEN_PATH`` with
``RAY_AUTH_MODE=token`` in the environment) gives the cluster's token to the driver.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from gpumosaic.errors import InputError

AUTH_HINT = (
    "the cluster wants a token: pass --ray-token-file PATH (the head's token, "
    "`ray get-auth-token`), or set RAY_AUTH_MODE=token and RAY_AUTH_TOKEN"
)
_FOREVER = threading.Event()  # never set
LOCAL_SETTLE_S = 60.0  # a local start past its deadline may finish this long, to be stopped
_AUTH_SIGNS = ("InvalidAuthToken", "Unauthenticated", "AuthenticationError", "auth token")
# Ray's switch for a single-machine instance: with "0" its node address is 127.0.0.1.
LOOPBACK_ENV = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"


class ConnectInterrupted(Exception):
    """SIGTERM or Ctrl-C arrived while Ray was connecting."""


def use_token_file(path: str) -> None:
    """Token authentication for this process and the Ray processes it starts."""
    file = Path(path)
    try:
        token = file.read_text().strip()
    except OSError as err:
        raise InputError(
            f"cannot read it: {err.strerror}", field="--ray-token-file", value=path
        ) from None
    if not token:
        raise InputError("is empty", field="--ray-token-file", value=path)
    os.environ["RAY_AUTH_MODE"] = "token"
    os.environ["RAY_AUTH_TOKEN_PATH"] = str(file.resolve())
    if "ray" in sys.modules:  # Ray reads its mode once: refresh it, as `ray start` does
        with contextlib.suppress(Exception):
            from ray._raylet import Config  # type: ignore[attr-defined]

            Config.initialize("")


def host_port(address: str) -> tuple[str, int] | None:
    """``host:port`` of a plain GCS address (None for ``auto``, ``ray://`` and the like)."""
    if "://" in address or address == "auto":
        return None
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit() or not host:
        raise InputError(
            "is not HOST:PORT (the head's GCS address)", field="--ray-address", value=address
        )
    return host.strip("[]"), int(port)


def probe(address: str, timeout_s: float) -> None:
    target = host_port(address)
    if target is None:
        return
    try:
        with socket.create_connection(target, timeout=max(timeout_s, 0.1)):
            return
    except OSError as err:
        why = "no answer" if isinstance(err, TimeoutError) else (err.strerror or str(err))
        raise InputError(
            f"cannot reach the Ray cluster: {why} (within {timeout_s:g} s, --ray-timeout-s)",
            field="--ray-address",
            value=address,
        ) from None


@contextlib.contextmanager
def _stderr_to(path: Path) -> Iterator[None]:
    """File descriptor 2 (where Ray's C++ core writes) redirected to ``path``."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        target = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    except OSError:
        yield
        return
    saved = os.dup(2)
    os.dup2(target, 2)
    os.close(target)
    try:
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def bounded_init(
    init: Callable[[], Any],
    *,
    address: str | None,
    timeout_s: float,
    stop: threading.Event,
    log_path: Path,
    shutdown: Callable[[], Any] = lambda: None,
) -> None:
    """Run ``init`` (``ray.init``) with a deadline and a way out; every failure is one
    ``InputError`` line (naming ``--ray-address``), an interruption ``ConnectInterrupted``.

    A remote connection that does not finish is abandoned (it ends with the process). A
    local Ray being started is not: its daemons would outlive us, so it is given up to
    ``LOCAL_SETTLE_S`` more to finish, and if it was interrupted, ``shutdown``
    (``ray.shutdown``) stops it again."""
    where = address or "a local Ray instance"
    flag = "--ray-address" if address else "--cluster"
    began = time.monotonic()
    if address:
        probe(address, timeout_s)
    outcome: list[BaseException | None] = []
    done = threading.Event()

    def run() -> None:
        try:
            init()
            outcome.append(None)
        except BaseException as err:  # handed to the waiting thread
            outcome.append(err)
            return
        finally:
            done.set()
        # Ray starts a local instance's daemons with PR_SET_PDEATHSIG, which Linux fires
        # when the *thread* that forked them ends: this thread lives as long as the process.
        _FOREVER.wait()

    # Only a remote connection retries noisily; a local start's daemons must keep stderr.
    quiet = _stderr_to(log_path) if address else contextlib.nullcontext()
    with quiet:
        worker = threading.Thread(target=run, name="gpumosaic-ray-connect", daemon=True)
        worker.start()
        deadline = began + timeout_s
        while not done.is_set() and time.monotonic() < deadline and not stop.is_set():
            _reclaim_signals()
            done.wait(0.1)
    if address is None and not done.is_set():  # a local Ray half started: let it finish
        done.wait(LOCAL_SETTLE_S)
    if stop.is_set():
        if address is None and outcome and outcome[0] is None:  # its daemons must not stay
            with contextlib.suppress(Exception):
                shutdown()
        raise ConnectInterrupted(f"interrupted while connecting to {where}")
    said = _read(log_path)
    hint = f"; {AUTH_HINT}" if any(s in said for s in _AUTH_SIGNS) else ""
    if not outcome:
        raise InputError(
            f"no connection to the Ray cluster within {timeout_s:g} s (--ray-timeout-s){hint}",
            field=flag,
            value=address,
        )
    err = outcome[0]
    if err is None:
        return
    if type(err).__name__ == "AuthenticationError":
        hint = f"; {AUTH_HINT}"
    first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
    raise InputError(f"cannot connect to Ray: {first[:300]}{hint}", field=flag, value=address)


def _reclaim_signals() -> None:
    """Put Python's handlers for SIGTERM and SIGINT back at the C level: Ray's core
    installs its own (a stack dump, then death) while it connects, which would make a
    SIGTERM during the connection a crash report instead of a clean stop."""
    if threading.current_thread() is not threading.main_thread():
        return
    for sig in (signal.SIGTERM, signal.SIGINT):
        handler = signal.getsignal(sig)
        if callable(handler):
            signal.signal(sig, handler)


def _read(path: Path) -> str:
    try:
        with open(path, "rb") as f:
            return f.read(200_000).decode("utf-8", "replace")
    except OSError:
        return ""


def init_local_ray(**kwargs: Any) -> None:
    """Start a local Ray instance that uses and listens on 127.0.0.1 only (module doc);
    ``kwargs`` go to ``ray.init`` (resources, logging)."""
    import ray

    os.environ[LOOPBACK_ENV] = "0"  # for the daemons and workers it starts
    # This process read the switch when it imported Ray: set Ray's copy too (a private
    # module of Ray; where a release has none, Ray takes the machine's address).
    with contextlib.suppress(ImportError, AttributeError):
        from ray._private import ray_constants

        ray_constants.ENABLE_RAY_CLUSTER = False
    ray.init(_node_ip_address="127.0.0.1", include_dashboard=False, **kwargs)
