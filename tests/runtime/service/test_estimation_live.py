"""Throughput estimation in the live service (in-process executor, fake clock): a job of
a type Gavel's table does not know is profiled on each GPU model, its rates then come
from its lease reports (EMA), and ``/metrics`` counts what the estimation did."""

from __future__ import annotations

import re
import urllib.request
from pathlib import Path

import pytest
from builders import in_process
from rounds_support import explain, job_body, wait_for

from gpumosaic.mechanisms.rounds.live.decider import estimation_metrics
from gpumosaic.runtime.api.client import ServiceClient


def test_an_unknown_job_is_profiled_on_each_model_then_runs_on_the_fastest(
    tmp_path: Path,
) -> None:
    rates = {"V100": 4.0, "K80": 1.0}
    bench = in_process(tmp_path, counts="v100:1,k80:1", rate_of=lambda job, model: rates[model])
    job = bench.submit(100_000)  # no job type: every rate unknown
    models: list[str] = []
    for _ in range(6):
        plan = bench.run_round(ticks=10, dt=1.0)
        models += [e.gpu_type for e in plan.entries]
    decider = bench.driver.decider
    assert decider.estimation is not None
    row = bench.driver.row_of[job]
    # It ran on both models (profiling), then stayed on the V100, its fastest.
    assert set(models[:3]) == {"V100", "K80"}
    assert models[-2:] == ["V100", "V100"]
    assert not decider.estimation.is_profiling(row)
    measured = decider.jobs.rates[row, :2]
    assert abs(measured[0] - 4.0) < 0.5 and abs(measured[1] - 1.0) < 0.2
    metrics = estimation_metrics(decider)
    assert metrics["estimation_profiled_jobs_total"] == 1
    assert metrics["estimation_profiling_rounds_total"] == 2
    assert metrics["estimation_estimated_entries_total"] == 2
    assert metrics["estimation_still_estimated"] == 0


def test_a_job_of_a_known_type_is_not_profiled(tmp_path: Path) -> None:
    bench = in_process(tmp_path, counts="v100:1,k80:1")
    bench.submit(100_000, job_type="ResNet-50 (batch size 64)")
    bench.run_round(ticks=10, dt=1.0)
    metrics = estimation_metrics(bench.driver.decider)
    assert metrics["estimation_profiled_jobs_total"] == 0
    assert metrics["estimation_profiling_rounds_total"] == 0


@pytest.mark.slow  # a Ray service: ~20 s
def test_on_ray_an_unknown_job_is_profiled_and_metrics_count_it(service_factory) -> None:  # type: ignore[no-untyped-def]
    service = service_factory(cluster="v100:1,k80:1", round_s=1.5)
    client = ServiceClient(service.url)
    job = client.submit(job_body(600, step_s=0.01))  # ~6 s of steps: four rounds or more
    wait_for(lambda: client.job(job)["state"] == "done", 180, "the job to finish", explain(service))
    models = [e.gpu_type for plan in service.plans for e in plan.entries if job in e.job_ids]
    assert {"V100", "K80"} <= set(models), models  # profiled on each model
    with urllib.request.urlopen(f"{service.url}/metrics", timeout=60) as response:
        text = response.read().decode()
    values = dict(re.findall(r"^gpumosaic_(estimation_\w+) (\S+)$", text, re.MULTILINE))
    assert float(values["estimation_profiled_jobs_total"]) == 1
    # Two, or more when a round ended before the job's first report (launch latency).
    assert float(values["estimation_profiling_rounds_total"]) >= 2
    assert float(values["estimation_estimated_entries_total"]) == 2
    assert float(values["estimation_still_estimated"]) == 0


def test_a_job_with_known_rates_is_not_profiled_and_is_planned_at_them(tmp_path: Path) -> None:
    """A submission's ``rates`` are its prior, as the simulator admits a workload's rates:
    no profiling, and the first plan runs it on its fastest model at the given rate."""
    true = {"V100": 4.0, "K80": 1.0}
    bench = in_process(tmp_path, counts="v100:1,k80:1", rate_of=lambda job, model: true[model])
    job = bench.submit(100_000, rates={"v100": 3.0, "k80": 1.5})  # not the true rates
    decider = bench.driver.decider
    plan = bench.run_round(ticks=10, dt=1.0)
    row = bench.driver.row_of[job]
    [entry] = plan.entries
    assert entry.gpu_type == "V100" and entry.rates == (3.0,)  # granted from its rates
    assert entry.steps[0] == pytest.approx(3.0 * 10.0)  # the round's seconds at that rate
    assert decider.jobs.rates[row, decider.type_names.index("K80")] == 1.5
    assert decider.estimation is not None and not decider.estimation.is_profiling(row)
    for _ in range(3):
        plan = bench.run_round(ticks=10, dt=1.0)
        assert [e.gpu_type for e in plan.entries] == ["V100"]
    # The measured rate replaces the prior on the model it ran on; the other stays given.
    assert decider.jobs.rates[row, decider.type_names.index("V100")] == pytest.approx(4.0, 0.1)
    metrics = estimation_metrics(decider)
    assert metrics["estimation_profiled_jobs_total"] == 0
    assert metrics["estimation_estimated_entries_total"] == 0


def test_a_model_the_known_rates_leave_out_is_estimated_and_profiled(tmp_path: Path) -> None:
    bench = in_process(tmp_path, counts="v100:1,k80:1", rate_of=lambda job, model: 1.0)
    job = bench.submit(100_000, rates={"V100": 1.0})
    models = []
    for _ in range(3):
        models += [e.gpu_type for e in bench.run_round(ticks=10, dt=1.0).entries]
    assert "K80" in models  # profiled on the model it has no rate for
    metrics = estimation_metrics(bench.driver.decider)
    assert metrics["estimation_profiled_jobs_total"] == 1
    assert metrics["estimation_estimated_entries_total"] == 1
    assert bench.store.known_rates(job) == {"V100": 1.0}


def test_known_rates_survive_a_restart(tmp_path: Path) -> None:
    from gpumosaic.runtime.state.store import Store

    bench = in_process(tmp_path, counts="v100:1,k80:1")
    job = bench.submit(100_000, rates={"K80": 0.5, "V100": 2.0})
    bench.store.close()
    again = in_process(tmp_path, counts="v100:1,k80:1", store=Store(tmp_path / "state.db"))
    assert again.store.known_rates(job) == {"K80": 0.5, "V100": 2.0}
    again.driver.recover()
    row = again.driver.row_of[job]
    decider = again.driver.decider
    assert list(decider.jobs.rates[row, :2]) == [
        {"V100": 2.0, "K80": 0.5}[name] for name in decider.type_names[:2]
    ]
