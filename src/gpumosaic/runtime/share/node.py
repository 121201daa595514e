"""One node's share daemons, supervised: the body of the Ray actor that ``serve
--sharing nvshare:...`` runs on every node (``runtime/share/supervisor.py``).

It starts one ``gpumosaic share daemon`` process per GPU of the node (one socket each,
all in one socket directory), restarts a daemon that dies (the interposers of its jobs
lose their connection, which frees their locks, and reconnect to the new daemon, which
starts with no holder), and counts from the daemons' event logs how often each client
(``GPUMOSAIC_SHARE_NAME``, ``job-<id>`` under the service) was handed the GPU. The
daemons die with the actor (``PR_SET_PDEATHSIG``), so a lost service leaves none behind.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from gpumosaic.runtime.share import limits
from gpumosaic.runtime.share.native import ShareError, library_path
from gpumosaic.runtime.share.sockets import prepare_socket_dir, socket_path
from gpumosaic.sharing.lock import AntiThrashing

# Where this gpumosaic is installed: the daemon processes import it from there too.
PACKAGE_ROOT = str(Path(__file__).resolve().parents[3])
READY_TIMEOUT_S = 30.0  # a daemon's start on a loaded machine (not a measurement)
RESTART_MIN_INTERVAL_S = 0.5  # a daemon that dies at once is not restarted in a busy loop
CHECK_INTERVAL_S = 0.1  # how often the monitor looks at its daemons
EVENT_READ_MAX = 1 << 20  # bytes of event log read per report (the rest: next report)
_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:  # pragma: no cover - runs in the child
    with contextlib.suppress(OSError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


@dataclass(frozen=True, slots=True)
class DaemonSettings:
    """What every daemon of the service runs with (checked by ``ShareDaemon`` too)."""

    tq_s: float
    anti_thrashing: AntiThrashing
    revoke_grace_s: float = limits.DEFAULT_REVOKE_GRACE_S


@dataclass(frozen=True, slots=True)
class NodeShareReport:
    """What one node's agent saw so far: restarts per GPU, hand-overs and grants per
    client name (cumulative since the agent started), and the daemons' pids."""

    restarts: tuple[tuple[int, int], ...]
    handovers: tuple[tuple[str, int], ...]
    grants: tuple[tuple[str, int], ...]
    pids: tuple[tuple[int, int], ...]


@dataclass(slots=True)
class _Daemon:
    gpu: int
    proc: subprocess.Popen[bytes]
    started_at: float
    restarts: int = 0
    log_offset: int = 0
    partial: bytes = b""


@dataclass(slots=True)
class _Counts:
    handovers: dict[str, int] = field(default_factory=dict)
    grants: dict[str, int] = field(default_factory=dict)


class NodeShareAgent:
    """The share daemons of ``gpus`` on this node, under ``socket_dir`` (see module doc).

    ``start()`` returns once every daemon answers on its socket; ``report()`` and
    ``daemon_pids()`` may be called from another thread (the actor is threaded)."""

    def __init__(
        self,
        socket_dir: str,
        gpus: Sequence[int],
        settings: DaemonSettings,
        python: str = sys.executable,
    ) -> None:
        if not gpus or len(set(gpus)) != len(gpus):
            raise ShareError(f"a node's share GPUs must be distinct indices, got {list(gpus)}")
        self.socket_dir = Path(socket_dir)
        self.gpus = tuple(limits.gpu_index(g) for g in gpus)
        self.settings = settings
        self.python = python
        self._mu = threading.Lock()
        self._daemons: dict[int, _Daemon] = {}
        self._counts = _Counts()
        self._stopping = threading.Event()
        self._monitor: threading.Thread | None = None

    # ---- life cycle -------------------------------------------------------------------

    def start(self) -> tuple[str, str]:
        """Start the daemons; (socket dir, path of the interposer built on this node)."""
        prepare_socket_dir(self.socket_dir)
        interposer = library_path("interposer")
        for gpu in self.gpus:
            self._daemons[gpu] = _Daemon(gpu, self._spawn(gpu), time.monotonic())
        for gpu in self.gpus:
            self._wait_ready(gpu)
        self._monitor = threading.Thread(target=self._watch, name="share-monitor", daemon=True)
        self._monitor.start()
        return str(self.socket_dir), str(interposer)

    def stop(self, grace_s: float = 5.0) -> None:
        self._stopping.set()
        if self._monitor is not None:
            self._monitor.join(timeout=5)
        with self._mu:
            daemons = list(self._daemons.values())
        for d in daemons:
            with contextlib.suppress(ProcessLookupError):
                d.proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        for d in daemons:
            try:
                d.proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                d.proc.kill()
                d.proc.wait(timeout=5)

    # ---- what the service asks ----------------------------------------------------------

    def report(self) -> NodeShareReport:
        with self._mu:
            for d in self._daemons.values():
                self._read_events(d)
            return NodeShareReport(
                restarts=tuple((g, d.restarts) for g, d in sorted(self._daemons.items())),
                handovers=tuple(sorted(self._counts.handovers.items())),
                grants=tuple(sorted(self._counts.grants.items())),
                pids=tuple((g, d.proc.pid) for g, d in sorted(self._daemons.items())),
            )

    def daemon_pids(self) -> dict[int, int]:
        with self._mu:
            return {g: d.proc.pid for g, d in self._daemons.items()}

    # ---- the daemons ---------------------------------------------------------------------

    def event_log(self, gpu: int) -> Path:
        return self.socket_dir / f"events-gpu{gpu}.jsonl"

    def _spawn(self, gpu: int) -> subprocess.Popen[bytes]:
        s = self.settings
        cmd = [
            self.python,
            "-m",
            "gpumosaic",
            "share",
            "daemon",
            "--socket-dir",
            str(self.socket_dir),
            "--gpus",
            str(gpu),
            "--tq",
            repr(s.tq_s),
            "--anti-thrashing",
            s.anti_thrashing.value,
            "--grace",
            repr(s.revoke_grace_s),
            "--event-log",
            str(self.event_log(gpu)),
        ]
        env = dict(os.environ)
        inherited = env.get("PYTHONPATH", "")
        env["PYTHONPATH"] = os.pathsep.join(p for p in (PACKAGE_ROOT, inherited) if p)
        env.pop("LD_PRELOAD", None)  # the daemon itself is never interposed
        with open(self.socket_dir / f"daemon-gpu{gpu}.log", "ab") as log:
            return subprocess.Popen(
                cmd,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=_die_with_parent,
            )

    def _answers(self, gpu: int) -> bool:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
            probe.settimeout(0.5)
            try:
                probe.connect(str(socket_path(self.socket_dir, gpu)))
            except OSError:
                return False
        return True

    def _wait_ready(self, gpu: int) -> None:
        deadline = time.monotonic() + READY_TIMEOUT_S
        d = self._daemons[gpu]
        while time.monotonic() < deadline:
            if d.proc.poll() is not None:
                tail = (self.socket_dir / f"daemon-gpu{gpu}.log").read_bytes()[-400:]
                raise ShareError(
                    f"the share daemon of GPU {gpu} exited ({d.proc.returncode}): "
                    f"{tail.decode('utf-8', 'replace').strip()}"
                )
            if self._answers(gpu):
                return
            time.sleep(0.05)
        raise ShareError(f"the share daemon of GPU {gpu} did not answer in {READY_TIMEOUT_S:g} s")

    def _watch(self) -> None:
        """Restart a daemon that died; its clients reconnect (interposer) and register
        afresh, so no lock of the dead daemon outlives it."""
        while not self._stopping.wait(CHECK_INTERVAL_S):
            for gpu in self.gpus:
                with self._mu:
                    d = self._daemons[gpu]
                    if d.proc.poll() is None:
                        continue
                    if time.monotonic() - d.started_at < RESTART_MIN_INTERVAL_S:
                        continue
                    if self._stopping.is_set():
                        return
                    self._read_events(d)
                    d.proc = self._spawn(gpu)
                    d.started_at = time.monotonic()
                    d.restarts += 1

    def _read_events(self, d: _Daemon) -> None:
        """Count the grants and hand-overs logged since the last read (caller holds _mu)."""
        try:
            with open(self.event_log(d.gpu), "rb") as f:
                f.seek(d.log_offset)
                chunk = f.read(EVENT_READ_MAX)
        except OSError:
            return
        d.log_offset += len(chunk)
        lines = (d.partial + chunk).split(b"\n")
        d.partial = lines.pop()  # an incomplete last line waits for the next read
        counts = self._counts
        for line in lines:
            try:
                record = json.loads(line)
            except ValueError:
                continue  # a line cut by a daemon that died mid-write
            if not isinstance(record, dict) or record.get("event") != "LOCK_OK":
                continue
            name = record.get("name")
            if not isinstance(name, str):
                continue
            counts.grants[name] = counts.grants.get(name, 0) + 1
            if record.get("handover") is True:
                counts.handovers[name] = counts.handovers.get(name, 0) + 1
