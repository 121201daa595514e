"""``serve --mechanism gandiva --sharing nvshare:...``: Gandiva's packed pair runs under
the share runtime (real job processes driving the stand-in libcuda through the real
interposer, one share daemon per GPU started and stopped by the service, on the test
run's local Ray)."""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

import httpx
import pytest

from gpumosaic.runtime.share.native import library_path
from waiting import wait_for

JOBS = Path(__file__).parents[3] / "runtime" / "service" / "jobs"
CUDA_TRAIN = f"{sys.executable} {JOBS / 'cuda_train.py'}"
PAIRS_WELL = "ResNet-18 (batch size 32)"  # Gavel's table: two of them pack with a gain


@pytest.fixture(autouse=True)
def short_socket_root(monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    """The service's socket dir under a fresh short tmp dir (a socket path has at most
    107 bytes), removed at the end."""
    root = tempfile.mkdtemp(prefix="gm-gshare-", dir="/tmp")
    monkeypatch.setenv("XDG_RUNTIME_DIR", root)
    yield Path(root)
    shutil.rmtree(root, ignore_errors=True)


def cuda_job(steps: float) -> dict[str, object]:
    env = {
        "LD_LIBRARY_PATH": str(library_path("fakecuda").parent),
        "FAKECUDA_MEMORY_MIB": "1024",
        "FAKECUDA_KERNEL_US": "2000",
        "GPUMOSAIC_SHARE_RESERVE_MIB": "0",
        "KERNELS": "5",
    }
    return {"command": CUDA_TRAIN, "steps": steps, "job_type": PAIRS_WELL, "env": env}


@pytest.mark.slow
def test_a_packed_pair_runs_under_the_share_daemon(ray_cluster: object, tmp_path: Path) -> None:
    from gpumosaic.run.serve import ServeDescription, Service, connect_ray

    config = ServeDescription(
        state=str(tmp_path / "gs" / "state.db"),
        port=0,
        grace_s=2.0,
        start_timeout_s=30.0,
        cluster="v100:1",
        mechanism="gandiva:quantum=30,switch=0.1,profile=1,migration=off",
        sharing="nvshare:tq=0.2,anti_thrashing=on,mem_cap=on",
    )
    service = Service(config, connect_ray(config))
    service.start()
    seen_packed: set[tuple[int, int]] = set()
    try:
        assert service.sharing is not None
        with httpx.Client(base_url=service.url, timeout=60) as client:
            ids = [client.post("/v1/jobs", json=cuda_job(150)).json()["id"] for _ in range(2)]

            def observe() -> list[dict]:
                jobs = client.get("/v1/jobs").json()
                seen_packed.update((j["id"], j["packed_with"]) for j in jobs if j["packed_with"])
                return jobs

            wait_for(
                observe,
                300,
                "the packed pair to end",
                until=lambda jobs: all(j["state"] in ("done", "failed") for j in jobs),
            )
            # The node agents' last counts (grants, hand-overs): awaited, with a bound far
            # above the 10 s default, which a loaded machine passed (lock_grants read 0).
            assert service.sharing.wait_reports(timeout_s=180), "the node agents' last reports"
            jobs = client.get("/v1/jobs").json()
    finally:
        service.stop()
    logs = {i: (tmp_path / "gs" / "logs" / f"job-{i}.log").read_text() for i in ids}
    assert [j["state"] for j in jobs] == ["done", "done"], (jobs, logs)
    # Gandiva packed the two on the one GPU ...
    assert seen_packed == {(ids[0], ids[1]), (ids[1], ids[0])}
    for job in jobs:
        # ... and each ran under the runtime: its GPU calls went through the daemon, which
        # handed the GPU between the two, and its memory was capped at its half.
        assert job["shared"] is True, job
        assert job["lock_grants"] >= 1, job
        assert job["handovers"] >= 1, job
        assert "meminfo total_mib=512 " in logs[job["id"]]
    assert not any("launch failed" in text or "TWICE" in text for text in logs.values())
