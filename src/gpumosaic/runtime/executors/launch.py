"""How a planned entity becomes a launch: its ranks on the Ray nodes and GPUs the plan
names, and the environment the job's processes get (the lease protocol's variables);
and how a process left over from a previous run of the service is stopped.

Pure functions of their inputs: the driver decides when to launch and keeps the leases.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path

from gpumosaic.lease import ENV_PACKED_WITH
from gpumosaic.model.gpu import MILLI_PER_GPU
from gpumosaic.model.plan import PlannedEntity
from gpumosaic.runtime.auth import job_token
from gpumosaic.runtime.cluster import LiveCluster
from gpumosaic.runtime.executors.contract import ENV_PACKED_WITH_JOB, LaunchSpec, RankLaunch
from gpumosaic.runtime.executors.job_env import RUN_AS
from gpumosaic.runtime.state.records import JobRow, LeaseRow

# Where this gpumosaic is installed: put on the job's PYTHONPATH so that
# ``import gpumosaic.lease`` works in a job started from a source checkout too.
PACKAGE_ROOT = str(Path(__file__).resolve().parents[3])


def launch_spec(
    job: JobRow,
    entry: PlannedEntity,
    lease_id: str,
    cluster: LiveCluster,
    *,
    server_url: str,
    token: str,
    checkpoint_dir: Path,
    log_path: Path,
    time_scale: float = 1.0,
    packed_with: JobRow | None = None,
    job_user: str = "",
) -> LaunchSpec:
    """The processes of ``job``'s new lease: one rank per GPU the plan gives it (a
    fractional job: one rank with its share of one GPU). A member of a packed pair
    (``packed_with``: its partner) runs on the pair's GPUs, the same device indices as
    its partner; each member holds half of each GPU in Ray's accounting (the pair holds
    it whole), and is told its partner's job type and id."""
    ranks: list[RankLaunch] = []
    members = len(entry.job_ids)
    for part in entry.parts:
        slot = cluster.slots[part.node]
        for device in cluster.devices(part.node, part.gpus):
            share = part.gpu_milli / MILLI_PER_GPU / members
            ranks.append(RankLaunch(len(ranks), slot.ray_node_id, slot.ip, (device,), share))
    if job.num_gpu > 1 and len(ranks) != job.num_gpu:
        raise AssertionError("a gang got a different number of GPUs than it asked for")
    env = dict(job.env)
    inherited = env.get("PYTHONPATH", os.environ.get("PYTHONPATH", ""))
    env.update(
        {
            "GPUMOSAIC_JOB_ID": str(job.id),
            "GPUMOSAIC_SERVER": server_url,
            "GPUMOSAIC_LEASE_ID": lease_id,
            "GPUMOSAIC_CHECKPOINT_DIR": str(checkpoint_dir),  # made by the executor
            "GPUMOSAIC_GPU_MILLI": str(job.gpu_milli),
            "GPUMOSAIC_GPU_MODEL": entry.gpu_type,
            "GPUMOSAIC_TOTAL_STEPS": repr(float(job.steps)),  # every digit (%g kept six)
            "PYTHONPATH": os.pathsep.join(p for p in (PACKAGE_ROOT, inherited) if p),
        }
    )
    column, factor = table_column(entry.gpu_type)
    if column is not None:  # emulated jobs read their rate from it (runtime/emulate.py)
        env["GPUMOSAIC_GPU_TABLE_COLUMN"] = f"{column}:{factor!r}"
    if packed_with is not None:  # emulated jobs step at the pair's rate (runtime/emulate.py)
        env[ENV_PACKED_WITH] = packed_with.job_type or "job"
        env[ENV_PACKED_WITH_JOB] = str(packed_with.id)
    if time_scale != 1.0:
        env["GPUMOSAIC_TIME_SCALE"] = repr(float(time_scale))
    if token:  # the job's own token (its leases only), never the service's (auth.py)
        env["GPUMOSAIC_TOKEN"] = job_token(token, job.id)
    if job_user:  # read and removed by the process starter (job_env.py)
        env[RUN_AS] = job_user
    return LaunchSpec(
        lease_id=lease_id,
        job_id=job.id,
        command=job.command,
        workdir=job.workdir,
        env=tuple(sorted(env.items())),
        log_path=str(log_path),
        gpu_model=entry.gpu_type,
        gpu_milli=job.gpu_milli,
        ranks=tuple(ranks),
    )


def table_column(gpu_type: str) -> tuple[str | None, float]:
    """The column of Gavel's throughput table that gives ``gpu_type``'s rates, and its
    factor (models Gavel never measured borrow one, ``BORROWED_RATES``)."""
    from gpumosaic.model.gpu import UnknownGpuModelError, gpu_model
    from gpumosaic.workloads.throughputs import BORROWED_RATES

    try:
        gpu = gpu_model(gpu_type)
    except UnknownGpuModelError:
        return None, 1.0
    if gpu.throughput_key is not None:
        return gpu.throughput_key, 1.0
    return BORROWED_RATES.get(gpu.name.upper(), (None, 1.0))


def stop_previous_process(lease: LeaseRow, grace_s: float) -> None:
    """Stop a process of a previous run if it still runs here; it is recognised by the
    lease id in its environment (never by its command line)."""
    pid = lease.pid
    if pid is None:
        return
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return  # gone, or not on this machine
    if f"GPUMOSAIC_LEASE_ID={lease.id}".encode() not in environ.split(b"\0"):
        return
    try:
        os.killpg(os.getpgid(pid), signal.SIGTERM)
    except (ProcessLookupError, PermissionError):
        return
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and Path(f"/proc/{pid}").exists():
        time.sleep(0.05)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(os.getpgid(pid), signal.SIGKILL)
