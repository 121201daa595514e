"""``gpumosaic submit``: the service's own admission rules before anything is sent, and
``--file`` all or nothing (issue 28, item 3): every row is checked first (file, row and
field named), then the rows go in one batch, and the ids are printed."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpumosaic.cli import app

runner = CliRunner()


def test_a_non_finite_or_absurd_number_is_one_line(api_factory) -> None:  # type: ignore[no-untyped-def]
    svc = api_factory(round_s=600.0)
    for args, flag in (
        (["--steps", "inf"], "--steps"),
        (["--steps", "nan"], "--steps"),
        (["--steps", "10", "--priority-weight", "1e-300"], "--priority-weight"),
        (["--steps", "10", "--gpu-milli", "5000"], "--gpu-milli"),
    ):
        result = runner.invoke(app, ["submit", "--server", svc.url, "--command", "true", *args])
        lines = result.output.strip().splitlines()
        assert result.exit_code == 2 and len(lines) == 1 and flag in lines[0], result.output
    assert svc.store.jobs() == []
    for command in (["job", "9223372036854775808"], ["logs", "1", "--tail", str(10**12)]):
        result = runner.invoke(app, [*command, "--server", svc.url])
        assert result.exit_code == 2 and len(result.output.strip().splitlines()) == 1


def test_submit_file_is_all_or_nothing(api_factory, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    svc = api_factory(round_s=600.0)
    jobs = tmp_path / "jobs.csv"
    jobs.write_text(
        "arrival_s,num_gpu,gpu_milli,duration_s,priority_weight\n"
        "0,1,500,100,1\n"
        "0,1,1000,100,1\n"
        "0,1,1000,100,0.0000001\n"  # row 4 of the file: a weight admission refuses
    )
    args = ["submit", "--server", svc.url, "--command", "echo {id}", "--file", str(jobs)]
    result = runner.invoke(app, args)
    lines = result.output.strip().splitlines()
    assert result.exit_code == 2 and len(lines) == 1, result.output
    assert "jobs.csv" in lines[0] and "row 4" in lines[0] and "priority_weight" in lines[0]
    assert svc.store.jobs() == []  # rows 2-3 were not started

    # Rows that pass the CLI but not the cluster (8 GPUs of a 4-GPU cluster): none go in.
    jobs.write_text("arrival_s,num_gpu,duration_s\n0,1,100\n0,8,100\n")
    result = runner.invoke(app, args)
    assert result.exit_code == 2 and "row 3" in result.output and "gpus" in result.output
    assert svc.store.jobs() == []

    jobs.write_text("arrival_s,num_gpu,duration_s\n0,1,100\n0,2,100\n0,1,50\n")
    result = runner.invoke(app, [*args, "--json"])
    assert result.exit_code == 0, result.output
    assert result.output.strip() == '{"ids": [1, 2, 3]}'
    assert [j.command for j in svc.store.jobs()] == ["echo 0", "echo 1", "echo 2"]


def test_submit_rates_reach_the_service_and_bad_ones_are_one_line(api_factory) -> None:  # type: ignore[no-untyped-def]
    svc = api_factory(round_s=600.0)
    base = ["submit", "--server", svc.url, "--command", "true", "--steps", "10"]
    for rates in ("v100=nan", "v100=0", "v100", "v100=1,V100=2", "z999=1", "v100=1e9", ""):
        result = runner.invoke(app, [*base, "--rates", rates])
        lines = result.output.strip().splitlines()
        assert result.exit_code == 2 and len(lines) == 1 and "--rates" in lines[0], result.output
    result = runner.invoke(app, [*base, "--gpu-models", "k80", "--rates", "v100=1"])
    assert result.exit_code == 2 and "--rates" in result.output and "gpu_models" in result.output
    assert svc.store.jobs() == []
    result = runner.invoke(app, [*base, "--rates", "v100=1.2,k80=0.4", "--json"])
    assert result.exit_code == 0, result.output
    [job] = svc.store.jobs()
    assert svc.store.known_rates(job.id) == {"V100": 1.2, "K80": 0.4}
    result = runner.invoke(app, ["job", str(job.id), "--server", svc.url, "--json"])
    assert json.loads(result.output)["rates"] == {"V100": 1.2, "K80": 0.4}, result.output


def test_submit_file_rates_go_with_every_row(api_factory, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    svc = api_factory(round_s=600.0)
    jobs = tmp_path / "jobs.csv"
    jobs.write_text("arrival_s,num_gpu,duration_s,name\n0,1,60,a\n0,1,90,b\n")
    result = runner.invoke(
        app,
        ["submit", "--server", svc.url, "--command", "true", "--file", str(jobs),
         "--rates", "v100=1,k80=1"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    rates = [svc.store.known_rates(j.id) for j in svc.store.jobs()]
    assert rates == [{"V100": 1.0, "K80": 1.0}] * 2


def test_bad_submissions_name_the_field(api_factory) -> None:  # type: ignore[no-untyped-def]
    service = api_factory(round_s=600.0)
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
    assert 'gpumosaic_jobs{state="' in metrics
    assert urllib.request.urlopen(service.url + "/openapi.json").status == 200
