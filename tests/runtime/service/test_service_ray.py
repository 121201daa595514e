"""The round service on a local Ray instance (logical GPUs): real subprocesses using
``gpumosaic.lease``, rounds of a few seconds. Only what needs Ray or a real process is here
(each test says what); the driver's logic is tested in-process on a fake clock
(test_driver.py, test_driver_leases.py), the API with the in-process executor."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from rounds_support import explain, job_body, running_per_round, wait_for
from typer.testing import CliRunner

from gpumosaic.cli import app
from gpumosaic.lease import read_checkpoint_steps
from gpumosaic.runtime.api.client import ServiceClient
from gpumosaic.runtime.auth import job_token
from gpumosaic.runtime.executors.contract import LaunchSpec, RankLaunch, rank_env

pytestmark = pytest.mark.slow  # a Ray service per test (issue 25)

runner = CliRunner()


def logs_of(service, job_id: int) -> str:  # type: ignore[no-untyped-def]
    return Path(service.log_path(job_id)).read_text()


def all_done(client: ServiceClient) -> bool:
    return all(j["state"] in ("done", "failed", "cancelled") for j in client.jobs())


def test_workload_completes_and_runs_what_the_decider_chose(service_factory) -> None:  # type: ignore[no-untyped-def]
    """What only Ray and real processes show: the GPU index the placement chose is the CUDA
    device the process saw, and no process of a lease runs twice. (The decider's choices
    being what runs is also tested in-process: test_driver.py.)"""
    service = service_factory(round_s=3.0)
    client = ServiceClient(service.url)
    ids = [
        client.submit(job_body(60, gpu_milli=500 if i < 2 else 1000, name=f"j{i}"))
        for i in range(6)
    ]
    wait_for(lambda: all_done(client), 240, "six jobs to finish", explain(service))
    jobs = {j["id"]: j for j in client.jobs()}
    assert {jobs[i]["state"] for i in ids} == {"done"}
    assert all(jobs[i]["steps_done"] == 60 for i in ids)
    ran = running_per_round(service.store)
    for k, plan in enumerate(service.plans):
        chosen = {j for e in plan.entries for j in e.job_ids}
        assert ran.get(k, set()) == chosen, f"round {k}"
    # The GPU index the placement chose is the one the process saw.
    for i in ids:
        devices = {
            d
            for lease in service.store.leases(i)
            for node, gpus, _ in lease.parts
            for d in service.cluster.devices(node, gpus)
        }
        seen = {int(c) for c in re.findall(r"cuda=(\d+)", logs_of(service, i))}
        assert seen and seen <= devices, (i, seen, devices)
        assert "TWICE" not in logs_of(service, i)
    half = [lease for i in ids[:2] for lease in service.store.leases(i)]
    assert all(lease.parts[0][2] == 500 for lease in half)


def test_preemption_resumes_from_the_checkpoint(service_factory) -> None:  # type: ignore[no-untyped-def]
    """What only real processes show: a preempted process checkpoints through the lease
    library on SIGTERM and its next process resumes from that file."""
    service = service_factory(cluster="v100:1", round_s=1.5, policy="max_min_fairness")
    client = ServiceClient(service.url)
    # 6 s of steps each against 1.5 s rounds: max-min fairness alternates the two, and a
    # job never holds more than two consecutive rounds (3 s), so each one is preempted at
    # least once however slow the machine (120 steps, 2.4 s, could finish inside two).
    ids = [client.submit(job_body(300, step_s=0.02)) for _ in range(2)]
    wait_for(lambda: all_done(client), 180, "two alternating jobs to finish", explain(service))
    for i in ids:
        assert client.job(i)["state"] == "done"
        starts = [int(s) for s in re.findall(r"from=(\d+)", logs_of(service, i))]
        assert len(starts) >= 2 and max(starts) > 0  # preempted, then resumed mid-way
        assert starts == sorted(starts)  # never further back than the last checkpoint
        ckpt = service.driver.checkpoint_dir(i)
        assert read_checkpoint_steps(ckpt) == 300
        assert json.loads((ckpt / "checkpoint.json").read_text())["state"]["starts"] == len(starts)


def test_cancel_and_a_failing_job(service_factory) -> None:  # type: ignore[no-untyped-def]
    """What only real processes show: a cancel kills the process (its pid is gone), and a
    real non-zero exit's code and log tail reach the job. (Retries: test_driver_leases.py.)"""
    service = service_factory(cluster="v100:2", round_s=3.0, max_retries=1)
    client = ServiceClient(service.url)
    long = client.submit(job_body(1_000_000))
    bad = client.submit(job_body(10, env={"FAIL_EXIT": "3"}))
    wait_for(
        lambda: client.job(long)["pid"] is not None, 60, "the long job to run", explain(service)
    )
    pid = client.job(long)["pid"]
    result = runner.invoke(app, ["cancel", str(long), "--server", service.url])
    assert result.exit_code == 0, result.output
    wait_for(lambda: client.job(long)["state"] == "cancelled", 60, "the cancel", explain(service))
    assert not Path(f"/proc/{pid}").exists()
    wait_for(
        lambda: client.job(bad)["state"] == "failed",
        120,
        "the failing job to fail",
        explain(service),
    )
    failed = client.job(bad)
    assert failed["exit_code"] == 3 and failed["attempts"] == 2
    assert "failing on purpose" in failed["log_tail"]
    assert "exit code 3" in failed["reason"]


def test_a_cpu_only_rank_sees_no_gpu() -> None:
    spec = LaunchSpec(
        "l",
        1,
        "true",
        "",
        (("A", "1"),),
        "/dev/null",
        "V100",
        0,
        (RankLaunch(0, "n", "127.0.0.1", (), 0.0),),
    )
    env = rank_env(spec, spec.ranks[0], 29500)
    assert env["CUDA_VISIBLE_DEVICES"] == "" and env["A"] == "1"


def test_the_numpy_example_runs_under_a_token_on_its_job_token(service_factory) -> None:  # type: ignore[no-untyped-def]
    """What only a real process shows: the README's example runs as a user runs it, and a
    real job's lease calls pass on its own job token (never the service's), which reaches
    its environment. The token's rules are tested in-process (test_auth.py)."""
    import sys

    example = Path(__file__).parents[3] / "examples" / "numpy_train.py"
    service = service_factory(cluster="v100:1", round_s=3.0, token="s3cret")
    client = ServiceClient(service.url, token="s3cret")
    command = f"echo token=$GPUMOSAIC_TOKEN; exec {sys.executable} {example}"
    job = client.submit({"command": command, "steps": 300})
    wait_for(lambda: all_done(client), 120, "the example to finish", explain(service))
    assert client.job(job)["state"] == "done"
    log = logs_of(service, job)
    assert "loss" in log
    assert f"token={job_token('s3cret', job)}" in log and "s3cret" not in log


def test_a_gang_runs_one_process_per_gpu(service_factory) -> None:  # type: ignore[no-untyped-def]
    """What only Ray shows: a gang's ranks are real processes, one per GPU, each on the
    device its lease names."""
    service = service_factory(cluster="v100:2", round_s=3.0)
    client = ServiceClient(service.url)
    job = client.submit(job_body(100, gpus=2))
    wait_for(lambda: all_done(client), 120, "the gang to finish", explain(service))
    assert client.job(job)["state"] == "done"
    log = logs_of(service, job)
    ranks = set(re.findall(r"rank=(\d)/2", log))
    assert ranks == {"0", "1"}
    devices = {int(d) for d in re.findall(r"cuda=(\d+)", log)}
    lease = service.store.leases(job)[0]
    assert devices == {d for n, g, _ in lease.parts for d in service.cluster.devices(n, g)}
    assert len(devices) == 2
