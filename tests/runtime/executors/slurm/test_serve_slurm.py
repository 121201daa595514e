"""``serve --executor slurm`` on the throw-away Slurm (tests/slurm_cluster.py): the
service reads its cluster from Slurm, runs each lease as a Slurm job pinned to the planned
node, and loses no job and runs none twice through a user's ``scancel``, a job that exits
early and a node whose ``slurmd`` is killed and restarted. Real processes (the service
tests' ``train.py``), short rounds; every wait is on a state, never a sleep."""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from gpumosaic.runtime.api.client import ServiceClient
from waiting import wait_for

pytestmark = pytest.mark.slow  # a real Slurm (started once per session)

TRAIN = f"{sys.executable} {Path(__file__).parents[2] / 'service' / 'jobs' / 'train.py'}"
ENDED = ("done", "failed", "cancelled")


def job_body(steps: float, **options: object) -> dict[str, object]:
    env = {"STEP_S": str(options.pop("step_s", 0.02))}
    env.update(options.pop("env", {}))  # type: ignore[arg-type]
    return {"command": TRAIN, "steps": steps, "env": env, **options}


@pytest.fixture
def serve(slurm, tmp_path: Path) -> Iterator[Callable[..., object]]:  # type: ignore[no-untyped-def]
    """Start ``serve --executor slurm`` services in this process; stopped at the end."""
    from gpumosaic.run.serve import ServeDescription, Service, connect_slurm

    started: list[Service] = []
    slurm.wait_quiet()  # what earlier tests left has ended

    def start(**options: object) -> Service:
        defaults: dict[str, object] = {
            "state": str(tmp_path / f"svc{len(started)}" / "state.db"),
            "port": 0,
            "round_s": 3.0,
            "grace_s": 2.0,
            "start_timeout_s": 30.0,
            "park_margin_s": 5.0,
            "executor": "slurm",
            "slurm_conf": str(slurm.conf),
        }
        config = ServeDescription(**{**defaults, **options})  # type: ignore[arg-type]
        service = Service(config, connect_slurm(config))
        service.start()
        started.append(service)
        return service

    yield start
    for service in started:
        service.stop()


def explain(service) -> Callable[[], str]:  # type: ignore[no-untyped-def]
    def text() -> str:
        store = service.store
        lines = [f"jobs: {[(j.id, j.state, j.steps_done, j.reason) for j in store.jobs()]}"]
        lines += [f"lease {x.id} {x.parts} {x.end_reason}" for x in store.leases()]
        lines += [f"event {e.kind} job {e.job_id} {e.detail}" for e in store.events()[-15:]]
        return "\n".join(lines)

    return text


def all_ended(client: ServiceClient) -> bool:
    return all(j["state"] in ENDED for j in client.jobs())


def log_of(service, job_id: int) -> str:  # type: ignore[no-untyped-def]
    return Path(service.log_path(job_id)).read_text()


def node_of(service, job_id: int) -> str | None:  # type: ignore[no-untyped-def]
    """The Slurm node the job's current lease runs on (None: no lease, or not started)."""
    job = service.store.job(job_id)
    if job is None or job.lease_id is None or job.pid is None:
        return None
    lease = next(x for x in service.store.leases(job_id) if x.id == job.lease_id)
    return str(service.cluster.slots[lease.parts[0][0]].ray_node_id)


def test_the_cluster_is_read_from_slurm(slurm) -> None:  # type: ignore[no-untyped-def]
    from gpumosaic.run.serve import ServeDescription, connect_slurm

    config = ServeDescription(executor="slurm", slurm_conf=str(slurm.conf))
    live = connect_slurm(config)
    assert live.spec.gpus_per_model() == {"V100": 2, "K80": 2}
    assert sorted({s.ray_node_id for s in live.slots}) == ["gm1", "gm2"]


@pytest.mark.parametrize("mechanism", ["rounds", "gandiva"])
def test_jobs_run_to_done_as_slurm_jobs_on_the_planned_node(serve, slurm, mechanism) -> None:  # type: ignore[no-untyped-def]
    service = serve(mechanism=mechanism)
    client = ServiceClient(service.url)
    ids = [
        client.submit(job_body(40, gpu_milli=500 if i == 0 else 1000, name=f"j{i}"))
        for i in range(4)
    ]
    wait_for(lambda: all_ended(client), 120, "four jobs to finish", explain(service))
    assert {client.job(i)["state"] for i in ids} == {"done"}
    for i in ids:
        log = log_of(service, i)
        assert "TWICE" not in log
        # The GPU index the placement chose is the one the job saw.
        devices = {
            d
            for lease in service.store.leases(i)
            for node, gpus, _ in lease.parts
            for d in service.cluster.devices(node, gpus)
        }
        seen = {int(c) for c in re.findall(r"cuda=(\d+)", log)}
        assert seen and seen <= devices, (i, seen, devices)
    # Every lease ran as a Slurm job, on the node the plan chose.
    listed = slurm.run("squeue", "-h", "-t", "all", "-o", "%j|%N").stdout.split()
    nodes = dict(line.split("|") for line in listed)
    for i in ids:
        for lease in service.store.leases(i):
            planned = service.cluster.slots[lease.parts[0][0]].ray_node_id
            assert nodes[f"gpumosaic-{lease.id}-0"] == planned


def test_a_users_scancel_and_a_job_that_exits_early(serve, slurm) -> None:  # type: ignore[no-untyped-def]
    service = serve(max_retries=1)
    client = ServiceClient(service.url)
    long = client.submit(job_body(250))
    bad = client.submit(job_body(10, env={"FAIL_EXIT": "3"}))
    wait_for(lambda: node_of(service, long), 60, "the long job to run", explain(service))
    steps = wait_for(lambda: client.job(long)["steps_done"], 60, "a checkpoint", until=bool)
    lease = service.store.job(long).lease_id
    slurm.run("scancel", f"--name=gpumosaic-{lease}-0")  # the user's, not the service's
    wait_for(
        lambda: client.job(long)["state"] == "done", 120, "the job to resume", explain(service)
    )
    assert "TWICE" not in log_of(service, long)
    starts = [int(s) for s in re.findall(r"from=(\d+)", log_of(service, long))]
    assert len(starts) >= 2 and starts == sorted(starts) and steps is not None
    ends = [x.end_reason for x in service.store.leases(long)]
    assert any("scancel" in (r or "") for r in ends), ends
    wait_for(lambda: client.job(bad)["state"] == "failed", 60, "the failing job", explain(service))
    failed = client.job(bad)
    assert failed["exit_code"] == 3 and failed["attempts"] == 2
    assert "failing on purpose" in failed["log_tail"]


def test_a_node_killed_and_restarted_loses_no_job(serve, slurm) -> None:  # type: ignore[no-untyped-def]
    service = serve()
    client = ServiceClient(service.url)
    ids = [client.submit(job_body(200, name=f"n{i}")) for i in range(2)]
    on_gm1 = wait_for(
        lambda: next((i for i in ids if node_of(service, i) == "gm1"), None),
        60,
        "a job on gm1",
        explain(service),
        until=lambda x: x is not None,
    )
    try:
        slurm.kill_node("gm1")
        kinds = lambda: [e.kind for e in service.store.events()]  # noqa: E731
        wait_for(lambda: "node_lost" in kinds(), 60, "gm1 to be lost", explain(service))
        wait_for(
            lambda: node_of(service, on_gm1) == "gm2" or client.job(on_gm1)["state"] == "done",
            90,
            "its job to resume on gm2",
            explain(service),
        )
    finally:
        slurm.start_node("gm1")
        slurm.wait_idle(("gm1",))
    wait_for(lambda: "node_returned" in kinds(), 60, "gm1 to return", explain(service))
    wait_for(lambda: all_ended(client), 180, "both jobs to finish", explain(service))
    for i in ids:
        job = client.job(i)
        assert job["state"] == "done" and job["steps_done"] == 200, job
        assert "TWICE" not in log_of(service, i)


def test_the_serve_command_on_slurm(slurm, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """``gpumosaic serve --executor slurm`` as an admin runs it: the cluster from
    ``SLURM_CONF`` (no --cluster), a job run to done, a clean stop on SIGTERM."""
    import os
    import signal
    import subprocess

    src = str(Path(__file__).parents[4] / "src")
    env = {**os.environ, "PYTHONPATH": src, "SLURM_CONF": str(slurm.conf)}
    argv = ["serve", "--executor", "slurm", "--port", "0", "--round-s", "3", "--grace-s", "2"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "gpumosaic.cli", *argv, "--state", str(tmp_path / "s.db")],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        assert url.startswith("http://"), (url, proc.poll())
        client = ServiceClient(url)
        job = client.submit(job_body(20))
        wait_for(lambda: client.job(job)["state"] in ENDED, 60, "the job to end")
        assert client.job(job)["state"] == "done"
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert "V100 x2, K80 x2" in err


def test_a_slurmctld_restart_loses_nothing(serve, slurm) -> None:  # type: ignore[no-untyped-def]
    """slurmctld stopped and started again (on its saved state) while jobs run: every job
    ends done, none runs twice."""
    service = serve()
    client = ServiceClient(service.url)
    ids = [client.submit(job_body(150, name=f"c{i}")) for i in range(3)]
    wait_for(lambda: all(node_of(service, i) for i in ids), 60, "the jobs to run", explain(service))
    slurm.restart_ctld()
    wait_for(lambda: all_ended(client), 120, "the jobs to finish", explain(service))
    for i in ids:
        job = client.job(i)
        assert job["state"] == "done" and job["steps_done"] == 150, job
        assert "TWICE" not in log_of(service, i)


EXAMPLE = Path(__file__).parents[4] / "examples" / "pytorch_train.py"


def test_a_pytorch_job_checkpoints_with_its_lease_on_slurm(serve, slurm) -> None:  # type: ignore[no-untyped-def]
    """examples/pytorch_train.py (a CPU MLP on synthetic data; no rate given: the
    estimator measures it) runs as Slurm jobs, five of them on four GPUs (one waits for
    a GPU), checkpointing through its lease, and each ends done at its steps."""
    torch = pytest.importorskip(
        "torch", reason="the PyTorch example needs torch (pip install gpumosaic[torch])"
    )
    import gpumosaic

    # The job's environment is clean: where torch and gpumosaic are, for its import.
    path = os.pathsep.join(str(Path(m.__file__).parents[1]) for m in (torch, gpumosaic))
    service = serve()
    client = ServiceClient(service.url)
    env = {"BATCH": "32", "PYTHONPATH": path}
    body = {"command": f"{sys.executable} {EXAMPLE}", "steps": 60, "env": env}
    ids = [client.submit({**body, "name": f"torch{i}"}) for i in range(5)]
    wait_for(lambda: all_ended(client), 240, "the PyTorch jobs to end", explain(service))
    for job_id in ids:
        row = client.job(job_id)
        assert row["state"] == "done", (row, explain(service)())
        assert "lease over at step 60" in log_of(service, job_id)
