"""Slurm users keep ``sbatch`` (docs/slurm.md): ``gpumosaic serve --executor slurm
--slurm-partition P`` adopts the jobs users submit to partition ``P``
(``sbatch -p P --gres=gpu[:TYPE]:N --comment "steps=N[,job_type=NAME][,milli=M]" job.sh``),
which ``job_submit.lua`` holds until gpumosaic starts them (``gpumosaic slurm setup``).
A job without ``steps=`` in its comment (or with ``lease=off``) does not use the lease
library: it runs as ONE non-preemptible lease, from its start to its script's exit (done
on exit code 0, failed otherwise), never stopped at a round's end.

- **Adoption** (``SlurmAdopter.poll``): each held job of ``P`` not yet known becomes a
  gpumosaic job named ``slurm-<id>`` (so ``gpumosaic jobs`` shows its Slurm id) whose
  environment carries ``GPUMOSAIC_SLURM_JOB``; one that cannot be adopted (a comment key
  it does not know, no GPU, more GPUs than the cluster has) stays held, said once in the
  event log.
- **A lease** of such a job (``AdoptedJob``, run by the Slurm executor): its lease's
  variables go to a file (0600, owned by the job's user) named in the job's
  ``AdminComment``, where ``Lease.from_env()`` finds them through ``SLURM_JOB_ID``; the job
  is pinned to the planned node (``scontrol update NodeList=``) and released. A stop is
  ``scancel --signal TERM --full`` (the script should ``exec`` its program, or pass the
  signal on), then ``scontrol requeuehold`` after the grace period; its next lease
  requeues it held (if it ended) and releases it again.
- **A user's ``scancel``** of an adopted job cancels its gpumosaic job; a gpumosaic job
  that ends (cancelled through gpumosaic) while its Slurm job still waits is cancelled
  in Slurm.
"""

from __future__ import annotations

import contextlib
import json
import os
import pwd
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from gpumosaic.runtime.executors.slurm.commands import SlurmCommands, SlurmError
from gpumosaic.runtime.jobs.submission import JobSubmission
from gpumosaic.runtime.state.store import Store

ENV_SLURM_JOB = "GPUMOSAIC_SLURM_JOB"  # an adopted job's Slurm job id, in its env
LEASE_MARK = "gpumosaic-lease="  # gpumosaic.lease.SLURM_LEASE_MARK
OWN_PREFIX = "gpumosaic-"  # the service's own lease jobs
_FORMAT = "%i|%j|%u|%b|%k|%T|%Z"


@dataclass(frozen=True, slots=True)
class HeldJob:
    slurm_id: str
    name: str
    user: str
    gres: str  # squeue's %b, e.g. gres:gpu:v100:2
    comment: str
    state: str
    workdir: str


def parse_comment(text: str) -> dict[str, str]:
    """``[steps=N][,job_type=NAME][,milli=M][,lease=off]`` -> its keys (a mistake:
    ValueError). No ``steps=`` (or ``lease=off``): the job does not use the lease library
    and runs as one non-preemptible lease (``lease`` is then ``off``)."""
    out: dict[str, str] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, sep, value = part.partition("=")
        if not sep or key.strip() not in ("steps", "job_type", "milli", "lease"):
            raise ValueError(f"{part!r} is not steps=N, job_type=NAME, milli=M or lease=off")
        out[key.strip()] = value.strip()
    if out.get("lease", "off" if "steps" not in out else "on") not in ("on", "off"):
        raise ValueError(f"lease={out['lease']} is not lease=on or lease=off")
    if "steps" not in out:
        if out.get("lease") == "on":
            raise ValueError("lease=on without steps=N in the job's --comment")
        out["lease"] = "off"
    return out


def submission(job: HeldJob) -> JobSubmission:
    """The gpumosaic job of a held Slurm job (ValueError or pydantic's: not adoptable)."""
    keys = parse_comment(job.comment if job.comment != "(null)" else "")
    fields = job.gres.removeprefix("gres:").split(":") if job.gres not in ("N/A", "") else []
    if not fields or fields[0] != "gpu":
        raise ValueError("no GPU asked for (--gres=gpu[:TYPE]:N)")
    count = int(fields[-1]) if fields[-1].isdigit() else 1
    models = [fields[1]] if len(fields) == 3 else []
    lease = keys.get("lease", "on") == "on"
    return JobSubmission(
        command=f"sbatch job {job.slurm_id} of {job.user}",
        steps=float(keys["steps"]) if "steps" in keys else 1.0,  # one run, steps unreported
        preemptible=lease,
        gpus=count,
        gpu_milli=int(keys.get("milli", "1000")),
        gpu_models=models,
        name=f"slurm-{job.slurm_id}",
        job_type=keys.get("job_type", ""),
        workdir=job.workdir if job.workdir.startswith("/") else "",
        env={ENV_SLURM_JOB: job.slurm_id},
    )


class SlurmAdopter:
    """Follows partition ``P``'s jobs (module doc); ``poll`` is called every half second
    or so by the service."""

    def __init__(
        self,
        store: Store,
        commands: SlurmCommands,
        partition: str,
        clock: Callable[[], float],
        default_retries: int,
        check_fits: Callable[[JobSubmission], tuple[str, str] | None],
    ) -> None:
        self.store = store
        self.commands = commands
        self.partition = partition
        self.clock = clock
        self.default_retries = default_retries
        self.check_fits = check_fits
        self.known: dict[str, int] = {}
        for row in store.jobs():  # adopted by a previous run of the service
            slurm_id = dict(row.env).get(ENV_SLURM_JOB)
            if slurm_id is not None:
                self.known[slurm_id] = row.id
        self.refused: set[str] = set()
        self.adopted_total = 0

    def poll(self) -> None:
        out = self.commands.run(
            ["squeue", "--noheader", "--states=all", f"--partition={self.partition}",
             f"--format={_FORMAT}"]
        )  # fmt: skip
        for line in out.splitlines():
            fields = line.strip().split("|")
            if len(fields) != 7 or fields[1].startswith(OWN_PREFIX):
                continue
            self._follow(HeldJob(*fields))

    def _follow(self, job: HeldJob) -> None:
        now = self.clock()
        job_id = self.known.get(job.slurm_id)
        if job_id is None:
            if job.state == "PENDING" and job.slurm_id not in self.refused:
                self._adopt(job, now)
            return
        row = self.store.job(job_id)
        if row is None:
            return
        if job.state == "CANCELLED" and not row.terminal and not row.cancel_requested:
            self.store.event(now, job_id, "slurm_cancelled", f"scancel of Slurm job {job.slurm_id}")
            self.store.request_cancel(job_id, now)
        elif row.terminal and job.state == "PENDING":
            with contextlib.suppress(SlurmError):  # cancelled in gpumosaic: in Slurm too
                self.commands.run(["scancel", job.slurm_id])

    def _adopt(self, job: HeldJob, now: float) -> None:
        try:
            sub = submission(job)
            problem = self.check_fits(sub)
            if problem is not None:
                raise ValueError(f"{problem[0]}: {problem[1]}")
        except ValueError as err:
            self.refused.add(job.slurm_id)
            why = str(err).splitlines()[0][:300]
            self.store.event(now, None, "slurm_not_adopted", f"Slurm job {job.slurm_id}: {why}")
            return
        job_id = self.store.add_job(sub, now, default_retries=self.default_retries)
        self.known[job.slurm_id] = job_id
        self.adopted_total += 1
        self.store.event(now, job_id, "slurm_adopted", f"Slurm job {job.slurm_id} of {job.user}")


@dataclass(slots=True)
class AdoptedJob:
    """The Slurm side of one lease of an adopted job (module doc)."""

    slurm_id: str
    commands: SlurmCommands
    lease_dir: Path

    def start(self, node: str, lease_env: dict[str, str]) -> None:
        info = self.show()
        if info.get("JobState") == "CANCELLED":  # by its user: never run again (the
            raise SlurmError(f"Slurm job {self.slurm_id} was cancelled in Slurm")  # adopter)
        if info.get("JobState") != "PENDING":  # a previous lease's run ended
            self.commands.run(["scontrol", "requeuehold", self.slurm_id])
        path = self.lease_dir / f"slurm-{self.slurm_id}.json"
        env = {k: v for k, v in lease_env.items() if k != "CUDA_VISIBLE_DEVICES"}  # Slurm's
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            json.dump(env, f)
        checkpoints = env.get("GPUMOSAIC_CHECKPOINT_DIR", "")
        if checkpoints:
            os.makedirs(checkpoints, exist_ok=True)
        user = info.get("UserId", "").split("(")[0]
        with contextlib.suppress(KeyError, OSError):  # the job's user reads and writes them
            entry = pwd.getpwnam(user)
            for owned in (str(path), checkpoints):
                if owned:
                    os.chown(owned, entry.pw_uid, entry.pw_gid)
        self.commands.run(
            ["scontrol", "update", f"JobId={self.slurm_id}", f"NodeList={node}",
             "StartTime=now", f"AdminComment={LEASE_MARK}{path}"]
        )  # fmt: skip
        self.commands.run(["scontrol", "release", self.slurm_id])

    def show(self) -> dict[str, str]:
        out = self.commands.run(["scontrol", "--oneliner", "show", "job", self.slurm_id])
        return dict(w.split("=", 1) for w in out.split() if "=" in w)

    def exit_code(self) -> int | None:
        try:
            code, _, sig = self.show().get("ExitCode", "").partition(":")
            return int(code) if sig in ("", "0") else 128 + int(sig)
        except (SlurmError, ValueError):
            return None

    def signal(self) -> None:
        self.commands.run(["scancel", "--signal=TERM", "--full", self.slurm_id])

    def hold(self, *, running: bool) -> None:
        """Back to held: a running job is ended and requeued held, a pending one held."""
        with contextlib.suppress(SlurmError):
            self.commands.run(["scontrol", "requeuehold" if running else "hold", self.slurm_id])
