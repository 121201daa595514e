"""Leases inside the training loop: the job side of ``gpumosaic serve`` (stdlib only).

A process the service launched finds everything it needs in its environment::

    from gpumosaic.lease import Lease
    lease = Lease.from_env()                 # job id, server, lease, checkpoint dir
    state = lease.load() or {"step": 0}      # the last saved state, or None
    for step in lease.steps(start=state["step"], save=lambda: state):
        train_one_step()                     # stops at lease end or when all steps are done
        state["step"] = step + 1
    lease.save(state)                        # JSON-serialisable; the next lease resumes from it

``steps`` asks the scheduler for a lease (steps and seconds) when it starts, reports the
steps as it goes (at least every ``report_every_s``; progress never goes through log
files), renews at 75 % of the grant, and at the end of the grant waits for the round
decision: an extended lease goes on in the same process, otherwise iteration stops so
the script saves and exits. SIGTERM (the scheduler preempting the job) also ends the
iteration at the next step. ``wrap(loader)`` does the same around any iterable.

``save`` (a callable returning the state to checkpoint) makes ``steps`` save on a cadence,
every ``checkpoint_every_s`` of job time (default 60) and at every lease extension, so a
job whose lease is extended round after round never runs long without a checkpoint: a
crash of the service costs at most one interval of steps.

Under a time scale (``GPUMOSAIC_TIME_SCALE``, ``serve --time-scale``) the grant's seconds
and the reported stepping time are job time: the loop divides and multiplies by the scale.

The checkpoint is one JSON file written atomically (temporary file, then rename) in
``GPUMOSAIC_CHECKPOINT_DIR``; the scheduler records its step count, so a job's progress
is never counted further back than its last checkpoint. A lease the scheduler no longer
knows (a previous run's, after a restart) is fenced: it stops and never writes.
"""

from __future__ import annotations

import json
import math
import os
import signal
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

ENV_JOB_ID = "GPUMOSAIC_JOB_ID"
ENV_SERVER = "GPUMOSAIC_SERVER"
ENV_LEASE_ID = "GPUMOSAIC_LEASE_ID"
ENV_CHECKPOINT_DIR = "GPUMOSAIC_CHECKPOINT_DIR"
ENV_GPU_MILLI = "GPUMOSAIC_GPU_MILLI"
ENV_RANK = "GPUMOSAIC_RANK"
ENV_WORLD_SIZE = "GPUMOSAIC_WORLD_SIZE"
ENV_TOTAL_STEPS = "GPUMOSAIC_TOTAL_STEPS"
ENV_TOKEN = "GPUMOSAIC_TOKEN"
ENV_TIME_SCALE = "GPUMOSAIC_TIME_SCALE"
ENV_CHECKPOINT_EVERY_S = "GPUMOSAIC_CHECKPOINT_EVERY_S"
ENV_PACKED_WITH = "GPUMOSAIC_PACKED_WITH"  # the partner's job type, for a packed pair

CHECKPOINT_FILE = "checkpoint.json"
RENEW_FRACTION = 0.75  # renew once 75 % of the grant (steps or time) is used, as Gavel
CHECKPOINT_EVERY_S = 60.0  # job time between the loop's own checkpoints (``save=``)
T = TypeVar("T")


class LeaseError(RuntimeError):
    """The process was not started by ``gpumosaic serve`` (its variables are missing)."""


@dataclass(frozen=True, slots=True)
class _Grant:
    until_step: float
    seconds_left: float
    total_steps: float
    stop: bool
    decision: int


def _positive(text: str, default: float) -> float:
    try:
        value = float(text)
    except ValueError:
        return default
    return value if 0 < value < float("inf") else default


def read_checkpoint_steps(directory: str | Path) -> float | None:
    """The step count of the checkpoint in ``directory`` (None if there is none)."""
    try:
        data = json.loads((Path(directory) / CHECKPOINT_FILE).read_text())
        return float(data["steps"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


# The share runtime's interposer (``serve --sharing nvshare:...`` preloads it) exports
# this: release the process's GPU lock while it waits (runtime/share/csrc/interposer.c).
SHARE_PARK_SYMBOL = "gpumosaic_share_park"
ENV_SHARE_SOCKET = "GPUMOSAIC_SHARE_SOCKET"  # set (with LD_PRELOAD) for shared jobs only
_share_park_fn: list[Callable[[], int] | None] = []  # looked up once per process


def share_park() -> bool:
    """Give up this process's GPU lock under the share runtime while the lease parks
    (waits for a round decision), so the jobs sharing its GPU use it meanwhile instead of
    losing the rest of its quantum; the next GPU call asks for the lock again. A no-op
    (False) unless the interposer is preloaded and this process holds its GPU's lock;
    True when a lock was released."""
    if not _share_park_fn:
        fn = None
        if os.environ.get(ENV_SHARE_SOCKET):
            import ctypes

            try:
                fn = getattr(ctypes.CDLL(None), SHARE_PARK_SYMBOL)  # the preloaded library
                fn.restype, fn.argtypes = ctypes.c_int, []
            except (OSError, AttributeError):
                fn = None  # not under the interposer (LD_PRELOAD unset or another library)
        _share_park_fn.append(fn)
    fn = _share_park_fn[0]
    return fn is not None and fn() == 1


@dataclass
class Lease:
    job_id: int
    server: str
    lease_id: str
    checkpoint_dir: Path
    gpu_milli: int = 1000
    rank: int = 0
    world_size: int = 1
    total_steps: float = float("inf")
    token: str = ""
    report_every_s: float = 1.0
    unreachable_s: float = 15.0  # give up (stop) after the server is unreachable this long
    time_scale: float = 1.0  # job seconds per wall second (serve --time-scale)
    checkpoint_every_s: float = CHECKPOINT_EVERY_S  # job time; with ``steps(save=...)``
    checkpoints: int = 0  # saves written by this process
    chunk: int = 1  # steps the current iteration of ``steps`` covers (``stride``)
    _began: float | None = field(default=None, repr=False)  # monotonic, after init
    _parked_s: float = field(default=0.0, repr=False)  # waiting for round decisions
    position: int = 0  # steps done (the index of the next step)
    _preempted: threading.Event = field(default_factory=threading.Event, repr=False)

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None) -> Lease:
        env = os.environ if environ is None else environ
        if ENV_LEASE_ID not in env and "SLURM_JOB_ID" in env:
            env = {**env, **slurm_lease_env(env["SLURM_JOB_ID"])}  # an adopted sbatch job
        missing = [
            k for k in (ENV_JOB_ID, ENV_SERVER, ENV_LEASE_ID, ENV_CHECKPOINT_DIR) if k not in env
        ]
        if missing:
            raise LeaseError(f"not started by gpumosaic serve: {', '.join(missing)} not set")
        lease = cls(
            job_id=int(env[ENV_JOB_ID]),
            server=env[ENV_SERVER].rstrip("/"),
            lease_id=env[ENV_LEASE_ID],
            checkpoint_dir=Path(env[ENV_CHECKPOINT_DIR]),
            gpu_milli=int(env.get(ENV_GPU_MILLI, "1000")),
            rank=int(env.get(ENV_RANK, "0")),
            world_size=int(env.get(ENV_WORLD_SIZE, "1")),
            total_steps=float(env.get(ENV_TOTAL_STEPS, "inf")),
            token=env.get(ENV_TOKEN, ""),
            time_scale=_positive(env.get(ENV_TIME_SCALE, "1"), 1.0),
            checkpoint_every_s=_positive(
                env.get(ENV_CHECKPOINT_EVERY_S, str(CHECKPOINT_EVERY_S)), CHECKPOINT_EVERY_S
            ),
        )
        lease._catch_sigterm()
        return lease

    # ---- preemption ----------------------------------------------------------------

    def _catch_sigterm(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        signal.signal(signal.SIGTERM, lambda *_: self._preempted.set())

    @property
    def preempted(self) -> bool:
        """SIGTERM arrived: the scheduler wants the GPUs back (checkpoint and exit)."""
        return self._preempted.is_set()

    # ---- the iterator --------------------------------------------------------------

    def steps(
        self, start: int = 0, save: Callable[[], Any] | None = None, stride: int = 1
    ) -> Iterator[int]:
        """Step indices from ``start``; stops at the lease's end, at preemption, when the
        lease is fenced, or when all the job's steps are done. ``save``: returns the state
        to checkpoint; called every ``checkpoint_every_s`` (job time) and at every
        extension, always between two steps. ``stride``: steps the loop's body does per
        iteration (``chunk`` says how many this one covers: fewer at a grant's end)."""
        self.position = int(start)
        grant = self._call("init", {"steps": self.position})
        if grant is None:
            return
        scale = self.time_scale
        every_wall = self.checkpoint_every_s / scale
        began = self._began = time.monotonic()
        self._parked_s = 0.0
        granted_at, from_step = began, self.position
        deadline = began + grant.seconds_left / scale
        renewed, last_report = -1, began
        saved_at = began
        while True:
            if self.position >= self.total_steps:
                self._call("progress", self._progress())
                return
            if self.preempted or grant.stop:
                self._call("progress", self._progress())
                return
            now = time.monotonic()
            if self.position >= grant.until_step or now >= deadline:
                t0 = time.monotonic()
                share_park()  # waiting for the decision: the GPU's lock to the others
                nxt = self._call("progress", self._progress(at_end=True))
                self._parked_s += time.monotonic() - t0
                if nxt is None or nxt.stop or nxt.seconds_left <= 0:
                    return
                if self.position >= nxt.until_step:
                    return
                grant = nxt
                granted_at, from_step = time.monotonic(), self.position
                deadline = granted_at + grant.seconds_left / scale
                if save is not None:  # extended: the process goes on, so save now
                    self.save(save())
                    saved_at = time.monotonic()
                continue
            if save is not None and now - saved_at >= every_wall:
                if not self.save(save()):
                    return  # fenced
                saved_at = time.monotonic()
                continue
            used_steps = (self.position - from_step) / max(grant.until_step - from_step, 1e-9)
            used_time = (now - granted_at) / max(deadline - granted_at, 1e-9)
            renew = max(used_steps, used_time) >= RENEW_FRACTION and renewed != grant.decision
            if renew or now - last_report >= self.report_every_s:
                nxt = self._call("progress", self._progress())
                last_report = time.monotonic()
                if nxt is None:
                    return
                if renew:
                    renewed = grant.decision
                if nxt.decision != grant.decision:
                    granted_at, from_step = last_report, self.position
                grant = nxt
                deadline = last_report + grant.seconds_left / scale
                if grant.stop or self.position >= grant.until_step:
                    continue  # the checks above end or park the lease
            limit = min(grant.until_step, self.total_steps) - self.position
            self.chunk = max(1, min(int(stride), math.ceil(limit)))
            yield self.position
            self.position += self.chunk

    def wrap(
        self, loader: Iterable[T], start: int = 0, save: Callable[[], Any] | None = None
    ) -> Iterator[T]:  # one batch per step (stride 1)
        """``steps`` around any data loader: one batch per step, re-iterating the loader
        (epochs) as needed."""
        it = iter(loader)
        for _ in self.steps(start, save):
            try:
                yield next(it)
            except StopIteration:
                it = iter(loader)
                yield next(it)

    def stepping_s(self) -> float:
        """Wall seconds this process has been stepping: since its lease's init, less the
        time parked waiting for round decisions (what its reports count, unscaled)."""
        if self._began is None:
            return 0.0
        return time.monotonic() - self._began - self._parked_s

    def _progress(self, at_end: bool = False) -> dict[str, Any]:
        elapsed = self.stepping_s() * self.time_scale
        return {"steps": self.position, "elapsed_s": elapsed, "at_end": at_end}

    # ---- checkpoints ---------------------------------------------------------------

    def save(self, state: Any) -> bool:
        """Write ``state`` (JSON-serialisable) as the job's checkpoint at the current step
        and tell the scheduler. Only rank 0 writes. Returns False if the lease is fenced
        (a newer lease owns the job) and nothing was written."""
        if self.rank != 0:
            return True
        self.checkpoint_dir.mkdir(parents=True, exist_ok=True)
        final = self.checkpoint_dir / CHECKPOINT_FILE
        tmp = self.checkpoint_dir / f".{CHECKPOINT_FILE}.{os.getpid()}.tmp"
        payload = {"steps": self.position, "lease_id": self.lease_id, "state": state}
        with open(tmp, "w") as f:
            json.dump(payload, f)
            f.flush()
            os.fsync(f.fileno())
        if self._fenced():
            tmp.unlink(missing_ok=True)
            print("gpumosaic.lease: lease ended elsewhere; checkpoint not written", file=sys.stderr)
            return False
        os.replace(tmp, final)  # the file first: the scheduler's count never runs ahead of it
        self._post("checkpoint", {"steps": self.position})
        self.checkpoints += 1
        return True

    def load(self) -> Any | None:
        """The state of the last checkpoint, or None."""
        try:
            data = json.loads((self.checkpoint_dir / CHECKPOINT_FILE).read_text())
        except (OSError, ValueError):
            return None
        return data.get("state") if isinstance(data, dict) else None

    # ---- HTTP ----------------------------------------------------------------------

    def _fenced(self) -> bool:
        status, _ = self._request("GET", f"/v1/leases/{self.lease_id}", None, retry=True)
        return status == 410

    def _call(self, verb: str, body: dict[str, Any]) -> _Grant | None:
        status, data = self._post(verb, body)
        if status != 200 or not isinstance(data, dict):
            return None  # fenced (410) or unreachable: stop
        return _Grant(
            float(data["until_step"]),
            float(data["seconds_left"]),
            float(data["total_steps"]),
            bool(data["stop"]),
            int(data["decision"]),
        )

    def _post(self, verb: str, body: dict[str, Any]) -> tuple[int, Any]:
        body = {**body, "rank": self.rank, "pid": os.getpid()}
        return self._request("POST", f"/v1/leases/{self.lease_id}/{verb}", body, retry=True)

    def _request(
        self, method: str, path: str, body: dict[str, Any] | None, retry: bool
    ) -> tuple[int, Any]:
        data = None if body is None else json.dumps(body).encode()
        headers = {"Content-Type": "application/json"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        give_up = time.monotonic() + self.unreachable_s
        delay = 0.1
        while True:
            req = urllib.request.Request(
                self.server + path, data=data, headers=headers, method=method
            )
            try:
                with urllib.request.urlopen(req, timeout=120) as resp:
                    return resp.status, json.loads(resp.read() or b"null")
            except urllib.error.HTTPError as err:
                return err.code, None
            except (urllib.error.URLError, OSError):
                if not retry or time.monotonic() > give_up:
                    return 0, None
                time.sleep(delay)
                delay = min(delay * 2, 2.0)


SLURM_LEASE_MARK = "gpumosaic-lease="  # in an adopted Slurm job's AdminComment


def slurm_lease_env(slurm_job_id: str) -> dict[str, str]:
    """The lease of a job submitted with ``sbatch`` to the partition ``gpumosaic serve
    --executor slurm --slurm-partition P`` adopts (docs/slurm.md): the service names the
    file with its lease's variables in the Slurm job's ``AdminComment`` before it starts
    the job; read through ``scontrol`` (``{}`` where there is none)."""
    import shutil
    import subprocess

    scontrol = shutil.which("scontrol") or "/usr/bin/scontrol"
    try:
        out = subprocess.run(
            [scontrol, "--oneliner", "show", "job", slurm_job_id],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        ).stdout
    except (OSError, subprocess.TimeoutExpired):
        return {}
    for word in out.split():
        if word.startswith("AdminComment=" + SLURM_LEASE_MARK):
            path = word[len("AdminComment=" + SLURM_LEASE_MARK) :]
            try:
                with open(path) as f:
                    values = json.load(f)
            except (OSError, ValueError):
                return {}
            return {str(k): str(v) for k, v in values.items()}
    return {}
