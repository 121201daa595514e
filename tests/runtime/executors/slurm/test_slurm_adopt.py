"""Slurm users keep sbatch: after ``gpumosaic slurm setup`` (and a slurmctld restart), a
job submitted to the adopted partition is held until ``serve --executor slurm
--slurm-partition`` starts it, runs under the service's decisions with its lease found
through its Slurm job id, shows in ``jobs`` as ``slurm-<id>``, ends done; a user's
``scancel`` cancels it in gpumosaic too."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpumosaic.cli import app
from gpumosaic.runtime.api.client import ServiceClient
from waiting import wait_for

pytestmark = pytest.mark.slow  # a real Slurm (started once per session)

TRAIN = Path(__file__).parents[2] / "service" / "jobs" / "train.py"
PARTITION = "adopt"


@pytest.fixture(scope="module")
def adopting(slurm):  # type: ignore[no-untyped-def]
    """The session's Slurm, set up by ``gpumosaic slurm setup`` for partition adopt."""
    result = CliRunner().invoke(
        app, ["slurm", "setup", "--conf", str(slurm.conf), "--partition", PARTITION]
    )
    assert result.exit_code == 0, result.output
    slurm.restart_ctld()  # a job_submit plugin is read when slurmctld starts
    slurm.run("scontrol", "reconfigure")  # the slurmds read the new slurm.conf too
    slurm.wait_schedulable()
    return slurm


@pytest.fixture
def serve(adopting, tmp_path: Path) -> Iterator[Callable[..., object]]:  # type: ignore[no-untyped-def]
    from gpumosaic.run.serve import ServeDescription, Service, connect_slurm

    started: list[Service] = []
    adopting.wait_quiet()  # what earlier tests left has ended

    def start(**options: object) -> Service:
        config = ServeDescription(
            state=str(tmp_path / f"svc{len(started)}" / "state.db"),
            port=0,
            round_s=3.0,
            grace_s=2.0,
            start_timeout_s=30.0,
            park_margin_s=5.0,
            executor="slurm",
            slurm_conf=str(adopting.conf),
            slurm_partition=PARTITION,
            **options,  # type: ignore[arg-type]
        )
        service = Service(config, connect_slurm(config))
        service.start()
        started.append(service)
        return service

    yield start
    for service in started:
        service.stop()


def sbatch(slurm, tmp_path: Path, steps: int, *, name: str) -> str:  # type: ignore[no-untyped-def]
    script = tmp_path / "job.sh"
    script.write_text(f"#!/bin/sh\nexec {sys.executable} {TRAIN}\n")
    out = slurm.run(
        "sbatch", "--parsable", f"--partition={PARTITION}", "--gres=gpu:1",
        f"--comment=steps={steps}", f"--output={tmp_path / name}.log", f"--job-name={name}",
        "--export=ALL,STEP_S=0.02", str(script),
    ).stdout  # fmt: skip
    return out.strip().split(";")[0]


def explain(service) -> str:  # type: ignore[no-untyped-def]
    store = service.store
    lines = [f"lease {x.id} {x.parts} {x.end_reason}" for x in store.leases()]
    lines += [f"event {e.kind} job {e.job_id} {e.detail}" for e in store.events()[-15:]]
    return "\n".join(lines)


def slurm_state(slurm, job: str) -> tuple[str, str]:  # type: ignore[no-untyped-def]
    out = slurm.run("squeue", "-h", "-t", "all", "-j", job, "-o", "%T|%r").stdout.strip()
    state, _, reason = out.partition("|")
    return state, reason


def test_sbatch_jobs_wait_for_the_service_and_run_under_it(serve, adopting, tmp_path) -> None:  # type: ignore[no-untyped-def]
    ids = [sbatch(adopting, tmp_path, 100, name=f"user{i}") for i in range(3)]
    for job in ids:  # held by job_submit.lua: nothing starts behind gpumosaic's back
        assert slurm_state(adopting, job) == ("PENDING", "JobHeldUser")
    # Rounds of 3 s: jobs are preempted (requeued held) and resumed, on other nodes too.
    service = serve()
    client = ServiceClient(service.url)
    names = {f"slurm-{j}" for j in ids}
    wait_for(
        lambda: {j["name"] for j in client.jobs()} >= names, 30, "the sbatch jobs to be adopted"
    )
    wait_for(
        lambda: all(j["state"] in ("done", "failed") for j in client.jobs() if j["name"] in names),
        120,
        "the adopted jobs to finish",
        lambda: str(client.jobs()),
    )
    for row in client.jobs():
        assert row["state"] == "done", (row["reason"], row["log_tail"], explain(service))
    for i, job in enumerate(ids):
        # Ended in Slurm too (FAILED where a round's stop signal met the job's own end)
        assert slurm_state(adopting, job)[0] in ("COMPLETED", "FAILED")
        log = (tmp_path / f"user{i}.log").read_text()
        assert "TWICE" not in log and "stop at step 100" in log


def test_a_users_scancel_cancels_the_job_in_gpumosaic(serve, adopting, tmp_path) -> None:  # type: ignore[no-untyped-def]
    job = sbatch(adopting, tmp_path, 1_000_000, name="long")
    service = serve()
    client = ServiceClient(service.url)

    def row() -> dict[str, object] | None:
        return next((j for j in client.jobs() if j["name"] == f"slurm-{job}"), None)

    wait_for(lambda: slurm_state(adopting, job)[0] == "RUNNING", 60, "the job to run")
    adopting.run("scancel", job)
    wait_for(
        lambda: (row() or {}).get("state") == "cancelled", 60, "the cancel", lambda: str(row())
    )


def test_a_job_without_the_lease_library_runs_once_to_its_exit(serve, adopting, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """No ``steps=`` in its comment: one non-preemptible lease. It runs on across round
    boundaries while lease jobs queue for the GPUs, ends done on exit 0; one that exits 3
    ends failed with its exit code."""
    go = tmp_path / "GO"
    plain = tmp_path / "plain.sh"  # waits for the test's go, so it spans several rounds
    plain.write_text(f"#!/bin/sh\necho started\nwhile [ ! -e {go} ]; do sleep 0.1; done\n")
    failing = tmp_path / "failing.sh"
    failing.write_text("#!/bin/sh\nexit 3\n")

    def submit(script: Path, name: str, *comment: str) -> str:  # plain sbatch: no comment
        out = adopting.run(
            "sbatch", "--parsable", f"--partition={PARTITION}", "--gres=gpu:1", *comment,
            f"--output={tmp_path / name}.log", "--open-mode=append", f"--job-name={name}",
            str(script),
        ).stdout  # fmt: skip
        return out.strip().split(";")[0]

    job = submit(plain, "plain")
    bad = submit(failing, "failing", "--comment=lease=off,job_type=ResNet-18 (batch size 64)")
    busy = [sbatch(adopting, tmp_path, 200, name=f"busy{i}") for i in range(4)]  # 4 GPUs
    service = serve()
    client = ServiceClient(service.url)

    def row(slurm_id: str) -> dict[str, object]:
        return next((j for j in client.jobs() if j["name"] == f"slurm-{slurm_id}"), {})

    wait_for(
        lambda: slurm_state(adopting, job)[0] == "RUNNING",
        60,
        "the plain job to run",
        lambda: f"{slurm_state(adopting, job)} {row(job)}\n{explain(service)}",
    )
    first = service.store.last_round()
    wait_for(
        lambda: service.store.last_round() >= first + 2,
        60,
        "two round boundaries while it runs",
        lambda: explain(service),
    )
    go.touch()
    ids = [job, bad, *busy]
    wait_for(
        lambda: all(row(j).get("state") in ("done", "failed") for j in ids),
        120,
        "every job to end",
        lambda: str(client.jobs()) + explain(service),
    )
    assert row(job)["state"] == "done", (row(job), explain(service))
    assert row(bad)["state"] == "failed" and "exit code 3" in str(row(bad)["reason"]), row(bad)
    for j in busy:
        assert row(j)["state"] == "done", (row(j), explain(service))
    plain_id = int(str(row(job)["id"]))
    assert [x.id for x in service.store.leases() if x.job_id == plain_id][1:] == [], explain(
        service
    )
    assert (tmp_path / "plain.log").read_text().count("started") == 1
    assert "Restarts=0" in adopting.run("scontrol", "show", "job", job).stdout
