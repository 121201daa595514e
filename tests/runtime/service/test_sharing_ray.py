"""``serve --sharing nvshare:...`` end to end on the test run's local Ray: real job
processes driving the stand-in libcuda through the real interposer, share daemons
started, supervised and stopped by the service (one agent actor per Ray node)."""

from __future__ import annotations

import os
import re
import shutil
import signal
import sys
import tempfile
import urllib.request
from pathlib import Path

import pytest
from rounds_support import JOBS, explain, wait_for

from gpumosaic.runtime.api.client import ServiceClient
from gpumosaic.runtime.share import client as share_client
from gpumosaic.runtime.share.native import library_path

CUDA_TRAIN = f"{sys.executable} {JOBS / 'cuda_train.py'}"
pytestmark = pytest.mark.slow


def cuda_job(steps: float, gpu_milli: int, **env: str) -> dict[str, object]:
    fake_dir = str(library_path("fakecuda").parent)
    base = {
        "LD_LIBRARY_PATH": fake_dir,
        "FAKECUDA_MEMORY_MIB": "1024",
        "FAKECUDA_KERNEL_US": "2000",
        "GPUMOSAIC_SHARE_RESERVE_MIB": "0",
        "KERNELS": "10",
    }
    base.update(env)
    return {"command": CUDA_TRAIN, "steps": steps, "gpu_milli": gpu_milli, "env": base}


def all_done(client: ServiceClient) -> bool:
    return all(j["state"] in ("done", "failed", "cancelled") for j in client.jobs())


def log_of(service, job_id: int) -> str:  # type: ignore[no-untyped-def]
    return Path(service.log_path(job_id)).read_text()


@pytest.fixture(autouse=True)
def short_socket_root(monkeypatch):  # type: ignore[no-untyped-def]
    """The services' socket dirs under a fresh short tmp dir (a socket path has at most
    107 bytes), removed at the end."""
    root = tempfile.mkdtemp(prefix="gm-share-", dir="/tmp")
    monkeypatch.setenv("XDG_RUNTIME_DIR", root)
    yield Path(root)
    shutil.rmtree(root, ignore_errors=True)


def device_of(service, job_id: int) -> int:  # type: ignore[no-untyped-def]
    """The GPU (device index on the node) the job's leases ran on."""
    devices = {
        d
        for lease in service.store.leases(job_id)
        for node, gpus, _ in lease.parts
        for d in service.cluster.devices(node, gpus)
    }
    assert len(devices) == 1, devices
    return devices.pop()


def holder_pid(service, gpu: int) -> int | None:  # type: ignore[no-untyped-def]
    (gpu_status,) = share_client.status(service.sharing.socket_dir, gpu)
    holder = gpu_status["holder"]
    return None if holder is None else int(holder["pid"])


def started(service, job_id: int) -> bool:  # type: ignore[no-untyped-def]
    path = Path(service.log_path(job_id))
    return path.exists() and "start pid=" in path.read_text()


def test_fractional_jobs_share_one_gpu_under_the_daemon(service_factory) -> None:  # type: ignore[no-untyped-def]
    service = service_factory(
        cluster="v100:1", round_s=20.0, sharing="nvshare:tq=0.2,anti_thrashing=on,mem_cap=on"
    )
    client = ServiceClient(service.url)
    # Each half asks for 300 MiB (fits its 512 MiB share), then for 400 MiB more (does not).
    halves = client.submit_batch([cuda_job(400, 500, ALLOC_MIB="300") for _ in range(2)])
    wait_for(lambda: all_done(client), 180, "two shared jobs to finish", explain(service))
    assert service.sharing.wait_reports(timeout_s=180), "the node agents' last reports"
    jobs = {j["id"]: j for j in client.jobs()}
    for i in halves:
        assert jobs[i]["state"] == "done", log_of(service, i)
        assert jobs[i]["shared"] is True
        assert jobs[i]["lock_grants"] >= 1  # its GPU calls went through the daemon
        text = log_of(service, i)
        assert "alloc rc=0" in text
        assert "meminfo total_mib=512 " in text  # its share of the 1024 MiB GPU
    # Both ran at once on the one GPU, so the lock changed hands between them.
    assert sum(jobs[i]["handovers"] for i in halves) >= 2
    assert all(jobs[i]["handovers"] >= 1 for i in halves)
    # The daemon served them (its event log names the jobs), and stops with the service.
    sock_dir, gpu = service.sharing.socket_dir, device_of(service, halves[0])
    assert device_of(service, halves[1]) == gpu
    assert (sock_dir / f"gpu{gpu}.sock").exists()
    events = (sock_dir / f"events-gpu{gpu}.jsonl").read_text()
    assert all(f'"name": "job-{i}"' in events for i in halves)


def test_mem_cap_refuses_an_allocation_beyond_the_share(service_factory) -> None:  # type: ignore[no-untyped-def]
    service = service_factory(cluster="v100:1", round_s=20.0, sharing="nvshare:tq=1,mem_cap=on")
    client = ServiceClient(service.url)
    # A quarter of 1024 MiB is 256 MiB: 300 MiB is refused (CUDA_ERROR_OUT_OF_MEMORY = 2);
    # the job asks for a larger cap itself, which the service does not let through.
    i = client.submit(cuda_job(5, 250, ALLOC_MIB="300", GPUMOSAIC_SHARE_MEM_CAP_MIB="4096"))
    wait_for(lambda: all_done(client), 120, "the capped job to finish", explain(service))
    text = log_of(service, i)
    assert "alloc rc=2" in text
    assert "meminfo total_mib=256 " in text


def test_a_dead_daemon_is_restarted_and_its_jobs_go_on(service_factory, ray_cluster) -> None:  # type: ignore[no-untyped-def]
    service = service_factory(
        cluster="v100:1", round_s=30.0, sharing="nvshare:tq=0.2,anti_thrashing=on"
    )
    client = ServiceClient(service.url)
    ids = client.submit_batch([cuda_job(150, 500, STEP_S="0.02") for _ in range(2)])
    wait_for(lambda: all(started(service, i) for i in ids), 60, "the jobs to start")
    gpu = device_of(service, ids[0])
    wait_for(lambda: holder_pid(service, gpu) is not None, 60, "a job to hold the GPU")
    (agent,) = service.sharing.agents().values()
    old = ray_cluster.get(agent.daemon_pids.remote())[gpu]
    os.kill(old, signal.SIGKILL)  # the daemon dies while a job holds the lock
    wait_for(
        lambda: ray_cluster.get(agent.daemon_pids.remote())[gpu] != old,
        120,
        "the daemon to be restarted",
    )
    wait_for(lambda: all_done(client), 180, "the jobs to finish", explain(service))
    assert service.sharing.wait_reports(timeout_s=180), "the node agents' last reports"
    assert service.sharing.daemon_restarts() >= 1
    metrics = urllib.request.urlopen(f"{service.url}/metrics", timeout=30).read().decode()
    assert re.search(r"share_daemon_restarts_total [1-9]", metrics), metrics
    for i in ids:
        job = client.job(i)
        assert job["state"] == "done", log_of(service, i)
        assert "reconnected to the daemon" in log_of(service, i)
    assert "launch failed" not in "".join(log_of(service, i) for i in ids)


def pid_of(service, job_id: int) -> int:  # type: ignore[no-untyped-def]
    match = re.search(r"start pid=(\d+)", log_of(service, job_id))
    assert match is not None
    return int(match.group(1))


def test_a_job_killed_holding_the_lock_does_not_stall_the_other(service_factory) -> None:  # type: ignore[no-untyped-def]
    # A quantum far longer than the test: only the killed holder's disconnect can hand
    # the GPU over in time.
    service = service_factory(
        cluster="v100:1", round_s=60.0, max_retries=0, sharing="nvshare:tq=600,anti_thrashing=on"
    )
    client = ServiceClient(service.url)
    # Both never end by themselves within the test unless they get the GPU.
    ids = client.submit_batch([cuda_job(200, 500), cuda_job(200, 500)])
    wait_for(lambda: all(started(service, i) for i in ids), 60, "both jobs to start")
    gpu = device_of(service, ids[0])
    assert device_of(service, ids[1]) == gpu
    wait_for(lambda: holder_pid(service, gpu) is not None, 60, "a job to hold the GPU")
    victim_pid = holder_pid(service, gpu)
    victim = next(i for i in ids if pid_of(service, i) == victim_pid)
    other = next(i for i in ids if i != victim)
    wait_for(  # the other asks for the lock the holder keeps (TQ 600 s)
        lambda: share_client.status(service.sharing.socket_dir, gpu)[0]["waiting"],
        60,
        "the other job to wait for the lock",
    )
    assert holder_pid(service, gpu) == victim_pid
    assert client.job(other)["steps_done"] == 0
    os.kill(victim_pid, signal.SIGKILL)
    # Done long before the 600 s quantum could end: the disconnect handed the GPU over.
    wait_for(lambda: client.job(other)["state"] == "done", 180, "the other job", explain(service))
    assert client.job(victim)["state"] != "done"
    assert "stop at step 200" in log_of(service, other)


def test_a_lost_node_agent_is_started_again_with_its_daemons(service_factory, ray_cluster) -> None:  # type: ignore[no-untyped-def]
    service = service_factory(
        cluster="v100:1", round_s=30.0, sharing="nvshare:tq=0.2,anti_thrashing=on"
    )
    client = ServiceClient(service.url)
    ids = client.submit_batch([cuda_job(150, 500, STEP_S="0.02") for _ in range(2)])
    wait_for(lambda: all(started(service, i) for i in ids), 60, "the jobs to start")
    (agent,) = service.sharing.agents().values()
    ray_cluster.kill(agent)  # the agent and, with it, its daemons (PR_SET_PDEATHSIG)
    wait_for(lambda: service.sharing.agent_restarts >= 1, 120, "a new agent")
    wait_for(lambda: all_done(client), 180, "the jobs to finish", explain(service))
    for i in ids:
        assert client.job(i)["state"] == "done", log_of(service, i)
        assert "reconnected to the daemon" in log_of(service, i)
