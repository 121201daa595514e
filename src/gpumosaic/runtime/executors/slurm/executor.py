"""The Slurm executor: each rank of a lease is one Slurm batch job pinned to the node the
placement chose (``--nodelist``), holding the GPUs it was given as typed GRES
(``--gres=gpu:TYPE:1`` for a whole GPU; a rank that shares a GPU, a fraction or a packed
pair's member, holds none in Slurm's accounting, gpumosaic's placement shares it). As on
Ray, the rank sees the GPU index the placement chose (``CUDA_VISIBLE_DEVICES``, set by
the batch job's runner: ``rank.py``), not the one Slurm picked: Slurm 22.05 cannot be
asked for one GPU index. (docs/slurm.md: with ``ConstrainDevices=yes`` both must agree.)

- **Launch**: ``sbatch --no-requeue`` (gpumosaic decides where a job runs again); the
  rank's spec (command, environment with its lease token, log) is a 0600 file in the
  service's data folder, which the nodes must see (a shared file system on a real
  cluster), as they must see the job logs.
- **Stop**: ``scancel --batch --signal TERM`` (the runner passes SIGTERM to the job, which
  checkpoints, and kills it after the grace period), then ``scancel`` once the grace
  period and ``CANCEL_MARGIN_S`` have passed. A rank still pending is cancelled at once.
- **Exit**: from ``squeue`` (all states, polled at most every ``POLL_EVERY_S``) and the
  exit file the runner writes. A job Slurm failed with its node (``NODE_FAIL``), one that
  ended without an exit file, one cancelled in Slurm by someone else (a user's
  ``scancel``) and one not started within the start timeout are *lost*: not the job's
  fault, its job resumes from its checkpoint.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from gpumosaic.runtime.executors.contract import ExitReport, LaunchSpec, RankLaunch, rank_env
from gpumosaic.runtime.executors.launch import PACKAGE_ROOT
from gpumosaic.runtime.executors.ray import CANNOT_START_CODE, log_tail
from gpumosaic.runtime.executors.slurm.adopt import ENV_SLURM_JOB, AdoptedJob
from gpumosaic.runtime.executors.slurm.commands import SlurmCommands, SlurmError
from gpumosaic.runtime.executors.slurm.rank import exit_path, grace_path

POLL_EVERY_S = 0.2  # least wall time between two squeue calls (~10 ms each)
CANCEL_MARGIN_S = 2.0  # after a stop's grace period, before the cancel (not a calibration)
JOB_PREFIX = "gpumosaic-"
ENDED = frozenset(
    {
        "COMPLETED", "FAILED", "CANCELLED", "NODE_FAIL", "TIMEOUT", "PREEMPTED",
        "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE", "REVOKED", "SPECIAL_EXIT",
    }
)  # fmt: skip
LOST_STATES = frozenset({"NODE_FAIL", "BOOT_FAIL", "PREEMPTED", "REVOKED"})
NOT_STARTED = frozenset({"PENDING", "CONFIGURING", "REQUEUED", "REQUEUE_HOLD"})


def job_name(lease_id: str, rank: int) -> str:
    return f"{JOB_PREFIX}{lease_id}-{rank}"


@dataclass(slots=True)
class _Rank:
    job_id: str
    spec_path: Path
    state: str = "PENDING"
    node: str = ""
    adopted: AdoptedJob | None = None  # a user's sbatch job (adopt.py)
    reason: str = ""  # why Slurm keeps it pending (squeue's %r)


@dataclass(slots=True)
class _Lease:
    spec: LaunchSpec
    ranks: list[_Rank]
    launched_at: float
    cancel_at: float | None = None  # stopped: cancelled in Slurm then
    stopped: bool = False
    cancelled: bool = False  # stopped before it started
    failure: str = ""  # sbatch refused it
    seen_running: bool = False
    results: dict[int, tuple[int | None, bool, str]] = field(default_factory=dict)


class SlurmExecutor:
    """Leases as Slurm batch jobs (see the module doc)."""

    def __init__(
        self,
        data_dir: str | Path,
        gres_types: dict[str, str],
        *,
        commands: SlurmCommands | None = None,
        partition: str | None = None,
        start_timeout_s: float = 120.0,
        grace_s: float = 10.0,
        python: str = sys.executable,
    ) -> None:
        self.commands = commands or SlurmCommands()
        self.partition = partition
        self.gres_types = gres_types
        self.start_timeout_s = start_timeout_s
        self.grace_s = grace_s
        self.python = python
        self.spec_dir = Path(data_dir) / "slurm-ranks"
        self.spec_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        # Adopted jobs' lease files: each 0600 and its job user's, in a folder they can cross
        self.lease_dir = Path(data_dir) / "slurm-leases"
        self.lease_dir.mkdir(parents=True, exist_ok=True)
        os.chmod(self.lease_dir, 0o711)
        self._running: dict[str, _Lease] = {}
        self._port = 29500
        self._polled_at = 0.0
        self.launches = 0
        self.squeue_failures = 0

    # ---- launch ------------------------------------------------------------------------

    def launch(self, spec: LaunchSpec) -> None:
        self.launches += 1
        self._port += 1
        lease = _Lease(spec, [], time.monotonic())
        os.makedirs(os.path.dirname(spec.log_path) or ".", exist_ok=True)  # Slurm's --output
        self._running[spec.lease_id] = lease
        slurm_id = dict(spec.env).get(ENV_SLURM_JOB)
        if slurm_id is not None:  # a user's sbatch job (adopt.py)
            self._launch_adopted(lease, slurm_id)
            return
        for rank in spec.ranks:
            path = self.spec_dir / f"{spec.lease_id}-{rank.rank}.json"
            for stale in (exit_path(path), grace_path(path)):
                stale.unlink(missing_ok=True)
            body = {
                "command": spec.command,
                "workdir": spec.workdir,
                "env": rank_env(spec, rank, self._port),
                "log_path": spec.log_path,
                "grace_s": self.grace_s,
            }
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w") as f:
                json.dump(body, f)
            try:
                job_id = self.commands.run(self._sbatch(spec, rank.rank, rank, path), env=_env())
            except SlurmError as err:
                lease.failure = str(err)[:300]
                self._cancel(lease)
                return
            lease.ranks.append(_Rank(job_id.strip().split(";")[0], path))

    def _launch_adopted(self, lease: _Lease, slurm_id: str) -> None:
        """A user's held sbatch job runs this lease on the first rank's node (adopt.py)."""
        spec = lease.spec
        first = spec.ranks[0]
        job = AdoptedJob(slurm_id, self.commands, self.lease_dir)
        try:
            job.start(first.node_id, rank_env(spec, first, self._port))
        except (SlurmError, OSError) as err:
            lease.failure = str(err)[:300]
            return
        lease.ranks.append(_Rank(slurm_id, self.lease_dir / f"slurm-{slurm_id}.json", adopted=job))

    def _sbatch(self, spec: LaunchSpec, index: int, rank: RankLaunch, path: Path) -> list[str]:
        argv = [
            "sbatch",
            "--parsable",
            f"--job-name={job_name(spec.lease_id, index)}",
            f"--nodelist={rank.node_id}",
            "--nodes=1",
            "--ntasks=1",
            "--no-requeue",
            "--export=ALL",
            f"--output={spec.log_path}",
            "--open-mode=append",
            f"--chdir={spec.workdir or self.spec_dir}",
        ]
        if self.partition:
            argv.append(f"--partition={self.partition}")
        if rank.devices and rank.gpu_share >= 1.0:
            gres_type = self.gres_types.get(spec.gpu_model, spec.gpu_model.lower())
            argv.append(f"--gres=gpu:{gres_type}:{len(rank.devices)}")
        command = " ".join(
            shlex.quote(w) for w in (self.python, "-m", "gpumosaic.runtime.executors.slurm.rank")
        )
        argv.append(f"--wrap=exec {command} {shlex.quote(str(path))}")
        return argv

    # ---- stop --------------------------------------------------------------------------

    def stop(self, lease_id: str, grace_s: float) -> None:
        lease = self._running.get(lease_id)
        if lease is None or lease.stopped:
            return
        lease.stopped = True
        self._refresh(force=True)
        if not lease.seen_running:  # nothing to checkpoint yet: do not wait for it
            lease.cancelled = True
            self._cancel(lease)
            return
        for rank in lease.ranks:
            if rank.adopted is not None:  # the user's script and its processes
                with contextlib.suppress(SlurmError):
                    rank.adopted.signal()
                continue
            with contextlib.suppress(OSError):
                grace_path(rank.spec_path).write_text(f"{grace_s:g}")
            with contextlib.suppress(SlurmError):
                self.commands.run(["scancel", "--batch", "--signal=TERM", rank.job_id])
        lease.cancel_at = time.monotonic() + grace_s + CANCEL_MARGIN_S

    def _cancel(self, lease: _Lease) -> None:
        for rank in lease.ranks:  # an adopted job goes back to held, never cancelled
            if rank.adopted is not None and rank.state not in ENDED:
                rank.adopted.hold(running=rank.state not in NOT_STARTED)
        ids = [r.job_id for r in lease.ranks if r.adopted is None]
        if ids:
            with contextlib.suppress(SlurmError):
                self.commands.run(["scancel", *ids])

    def reap(self, lease_id: str, ranks: int) -> None:
        """Cancel the Slurm jobs of a lease a previous run of the service left."""
        names = ",".join(job_name(lease_id, r) for r in range(ranks))
        with contextlib.suppress(SlurmError):
            self.commands.run(["scancel", f"--name={names}"])

    # ---- exits -------------------------------------------------------------------------

    def _refresh(self, *, force: bool = False) -> bool:
        """Each rank's Slurm state, from one ``squeue`` call (False: not asked now)."""
        now = time.monotonic()
        if not self._running or (not force and now - self._polled_at < POLL_EVERY_S):
            return False
        self._polled_at = now
        try:
            out = self.commands.run(
                ["squeue", "--noheader", "--states=all", "--format=%i|%T|%N|%r"]
            )
        except SlurmError:
            self.squeue_failures += 1
            return False
        listed = {}
        for line in out.splitlines():
            fields = line.strip().split("|")
            if len(fields) == 4:
                listed[fields[0]] = (fields[1], fields[2], fields[3])
        for lease in self._running.values():
            for rank in lease.ranks:
                state, node, reason = listed.get(rank.job_id, ("GONE", rank.node, ""))
                rank.state, rank.node, rank.reason = state, node, reason
            if lease.ranks and all(r.state not in NOT_STARTED for r in lease.ranks):
                lease.seen_running = True
        return True

    def poll(self) -> list[ExitReport]:
        out: list[ExitReport] = []
        for lease_id, lease in list(self._running.items()):
            if lease.failure or lease.cancelled:
                del self._running[lease_id]
                detail = lease.failure or "stopped before it started"
                out.append(ExitReport(lease_id, None, bool(lease.failure), "", detail))
        if not self._refresh():
            return out
        now = time.monotonic()
        for lease_id, lease in list(self._running.items()):
            if lease.cancel_at is not None and now > lease.cancel_at:
                lease.cancel_at = None
                self._cancel(lease)  # the grace period is over
            if not lease.seen_running and now - lease.launched_at > self.start_timeout_s:
                self._cancel(lease)
                del self._running[lease_id]
                why = ", ".join(sorted({r.reason for r in lease.ranks if r.reason}))
                detail = f"not started in time (Slurm: {why or 'pending'})"
                out.append(ExitReport(lease_id, None, True, "", detail))
                continue
            for i, rank in enumerate(lease.ranks):
                if i not in lease.results and (rank.state in ENDED or rank.state == "GONE"):
                    lease.results[i] = self._result(lease, rank)
                elif i not in lease.results and rank.adopted is not None and _requeued(lease, rank):
                    lease.results[i] = (0, False, "")  # stopped: ended and held again
            if any(lost for _, lost, _ in lease.results.values()) and len(lease.results) < len(
                lease.ranks
            ):
                self._cancel(lease)  # a gang does not go on with a rank missing
                for i in range(len(lease.ranks)):
                    lease.results.setdefault(i, (None, True, "gang member lost"))
            if len(lease.results) == len(lease.ranks):
                del self._running[lease_id]
                out.append(self._report(lease_id, lease))
        return out

    def _result(self, lease: _Lease, rank: _Rank) -> tuple[int | None, bool, str]:
        """(exit code, lost, detail) of one rank's ended Slurm job."""
        where = f"Slurm job {rank.job_id} on {rank.node or '?'}"
        if rank.state in LOST_STATES:
            return None, True, f"{where}: {rank.state}"
        if rank.adopted is not None:
            if rank.state == "CANCELLED" and not lease.stopped:
                return None, True, f"{where} cancelled in Slurm (scancel)"
            return rank.adopted.exit_code(), False, ""
        try:
            result = json.loads(exit_path(rank.spec_path).read_text())
        except (OSError, ValueError):
            return None, True, f"{where} ended {rank.state} without an exit code"
        code = int(result["code"])
        if rank.state == "CANCELLED" and not lease.stopped:
            return code, True, f"{where} cancelled in Slurm (scancel)"
        detail = str(result.get("failure", "")) if code == CANNOT_START_CODE else ""
        return code, False, detail

    @staticmethod
    def _report(lease_id: str, lease: _Lease) -> ExitReport:
        results = [lease.results[i] for i in range(len(lease.ranks))]
        lost = any(r[1] for r in results)
        codes = [r[0] for r in results if r[0] is not None]
        code = next((c for c in codes if c != 0), 0 if codes else None)
        detail = next((r[2] for r in results if r[2]), "")
        return ExitReport(lease_id, code, lost, log_tail(lease.spec.log_path), detail)

    def shutdown(self) -> None:
        for lease in self._running.values():
            self._cancel(lease)
        self._running.clear()


def _requeued(lease: _Lease, rank: _Rank) -> bool:
    """An adopted job that ran and is pending again: requeued held after a stop."""
    return lease.seen_running and lease.stopped and rank.state in NOT_STARTED


def _env() -> dict[str, str]:
    """sbatch's environment, which the batch job inherits (``--export=ALL``): the few
    variables a program needs and the path to this gpumosaic; the rank's own variables
    are in its spec file, read by the runner (never on a command line)."""
    keep = ("PATH", "LANG", "LC_ALL", "HOME", "TMPDIR", "SLURM_CONF")
    env = {k: os.environ[k] for k in keep if k in os.environ}
    env["PYTHONPATH"] = PACKAGE_ROOT
    return env
