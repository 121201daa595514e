"""The round service on a local Ray instance (logical GPUs): real subprocesses using
``gpumosaic.lease``, rounds of a few seconds."""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from rounds_support import explain, job_body, running_per_round, wait_for
from typer.testing import CliRunner

from gpumosaic.cli import app
from gpumosaic.errors import InputError
from gpumosaic.lease import read_checkpoint_steps
from gpumosaic.run.serve import ServeDescription
from gpumosaic.runtime.api.client import ServiceClient
from gpumosaic.runtime.auth import job_token
from gpumosaic.runtime.executors.contract import LaunchSpec, RankLaunch, rank_env

pytestmark = pytest.mark.slow  # a Ray service per test: ~90 s in all (issue 25)

runner = CliRunner()


def logs_of(service, job_id: int) -> str:  # type: ignore[no-untyped-def]
    return Path(service.log_path(job_id)).read_text()


def all_done(client: ServiceClient) -> bool:
    return all(j["state"] in ("done", "failed", "cancelled") for j in client.jobs())


def test_workload_completes_and_runs_what_the_decider_chose(service_factory) -> None:  # type: ignore[no-untyped-def]
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


def test_lease_extension_keeps_the_process(service_factory) -> None:  # type: ignore[no-untyped-def]
    service = service_factory(cluster="v100:1", round_s=2.0)
    client = ServiceClient(service.url)
    job = client.submit(job_body(250, step_s=0.02))  # ~5 s of steps: several rounds
    wait_for(lambda: all_done(client), 120, "the job to finish", explain(service))
    leases = service.store.leases(job)
    assert len(leases) == 1 and leases[0].extensions >= 1
    assert len(re.findall(r"start pid=(\d+)", logs_of(service, job))) == 1
    assert client.job(job)["state"] == "done"


def test_cancel_and_a_failing_job(service_factory) -> None:  # type: ignore[no-untyped-def]
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


def test_a_lost_actor_sends_its_job_back_to_the_queue(service_factory) -> None:  # type: ignore[no-untyped-def]
    service = service_factory(cluster="v100:1", round_s=3.0)
    client = ServiceClient(service.url)
    job = client.submit(job_body(150, step_s=0.02))
    wait_for(
        lambda: client.job(job)["steps_done"] > 20, 60, "the job to make progress", explain(service)
    )
    lease_id = client.job(job)["lease_id"]
    service.executor.kill(lease_id)  # as a dead node would
    wait_for(lambda: all_done(client), 120, "the job to finish after the loss", explain(service))
    assert client.job(job)["state"] == "done"
    first = service.store.leases(job)[0]
    assert first.id == lease_id and first.end_reason.startswith("lost")
    assert len(service.store.leases(job)) >= 2
    assert service.driver.counters.lost == 1


def test_bad_submissions_name_the_field(service_factory) -> None:  # type: ignore[no-untyped-def]
    service = service_factory(cluster="v100:2")
    base = ["submit", "--server", service.url, "--command", "python x.py", "--steps", "60"]
    # The CLI checks the service's own rules first (the flag is named); fitting the
    # cluster is the service's check (the field is named).
    for extra, field in ((["--gpu-milli", "1500"], "--gpu-milli"), (["--gpus", "9"], "gpus")):
        result = runner.invoke(app, base + extra)
        assert result.exit_code == 2
        lines = result.output.strip().splitlines()
        assert len(lines) == 1 and field in lines[0], result.output
    req = urllib.request.Request(
        service.url + "/v1/jobs",
        data=b'{"command": "x", "steps": -1}',
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(req)
    assert err.value.code == 422
    assert json.loads(err.value.read())["detail"][0]["loc"] == ["body", "steps"]
    ok = runner.invoke(app, [*base, "--gpus", "1", "--gpu-milli", "500", "--name", "j1", "--json"])
    assert ok.exit_code == 0 and set(json.loads(ok.output)) == {"id"}
    listed = runner.invoke(app, ["jobs", "--server", service.url, "--json"])
    row = json.loads(listed.output)[0]
    assert {"id", "name", "state", "steps_done"} <= set(row) and row["name"] == "j1"
    metrics = urllib.request.urlopen(service.url + "/metrics").read().decode()
    assert 'gpumosaic_jobs{state="queued"}' in metrics or 'state="running"' in metrics
    assert urllib.request.urlopen(service.url + "/openapi.json").status == 200


def test_token_required_off_loopback_and_enforced(service_factory) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(InputError, match="--token"):
        ServeDescription(host="0.0.0.0")
    assert ServeDescription(host="0.0.0.0", token="s3cret").token == "s3cret"
    service = service_factory(cluster="v100:1", token="s3cret")
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(service.url + "/v1/jobs")
    assert err.value.code == 401
    client = ServiceClient(service.url, token="s3cret")
    assert client.jobs() == []
    # A real job under the token: it runs on its own token (its leases only), never sees
    # the service's, and finishes.
    body = job_body(30)
    body["command"] = f"echo token=$GPUMOSAIC_TOKEN; exec {body['command']}"
    job = client.submit(body)
    wait_for(lambda: all_done(client), 120, "the job to finish", explain(service))
    assert client.job(job)["state"] == "done"
    log = logs_of(service, job)
    assert f"token={job_token('s3cret', job)}" in log and "s3cret" not in log


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


def test_the_numpy_example_runs_under_the_service(service_factory) -> None:  # type: ignore[no-untyped-def]
    import sys

    example = Path(__file__).parents[3] / "examples" / "numpy_train.py"
    service = service_factory(cluster="v100:1", round_s=3.0)
    client = ServiceClient(service.url)
    job = client.submit({"command": f"{sys.executable} {example}", "steps": 300})
    wait_for(lambda: all_done(client), 120, "the example to finish", explain(service))
    assert client.job(job)["state"] == "done"
    assert "loss" in logs_of(service, job)


def test_a_gang_runs_one_process_per_gpu(service_factory) -> None:  # type: ignore[no-untyped-def]
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
