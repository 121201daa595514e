"""``sim-vs-live`` on every workload ``simulate --mechanism rounds`` takes: each emulated
job gets the simulator's own rates (``emulate --rates``), so openb tasks and job lists in
``duration_s`` replay live as Gavel workloads do; a window's stream goes on past it."""

from __future__ import annotations

import json
import math
import shlex
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpumosaic.cli import app
from gpumosaic.experiments.sim_vs_live.inputs import finite_jobs
from gpumosaic.experiments.sim_vs_live.replay import EmulatedJobs, _as_workload_job
from gpumosaic.experiments.sim_vs_live.rounds import _emulated, _gpu_jobs, rounds_description
from gpumosaic.mechanisms.contract import RunParts
from gpumosaic.model.gpu import gpu_model
from gpumosaic.model.job import JobSpec
from gpumosaic.results.result import JobRecord, JobStatus
from gpumosaic.run.build import build_parts
from gpumosaic.run.description import RunDescription
from gpumosaic.runtime.emulate import EmulationError, main, parse_rates, rate_of, table_rate

ROOT = Path(__file__).resolve().parents[2]
JOB_LIST = ROOT / "docs" / "examples" / "sim_vs_live_jobs.csv"
OPENB_SUBSET = ROOT / "docs" / "examples" / "openb_subset.csv"
SMALL_LIST = Path(__file__).parent / "jobs" / "sim_vs_live_durations.csv"


def parts_of(workload: str, cluster: str = "v100:2,p100:2,k80:2") -> RunParts:
    description = RunDescription(
        cluster=cluster, workload=workload, policy="max_min_fairness_perf", mechanism="rounds"
    )
    return build_parts(rounds_description(description))


def rates_in(command: str) -> dict[str, float]:
    """What the emulated job parses from its command line."""
    words = shlex.split(command)
    assert words[1:3] == ["-m", "gpumosaic.runtime.emulate"]
    return parse_rates(words[words.index("--rates") + 1])


def test_a_duration_job_steps_at_one_step_per_second_of_its_duration_on_every_model() -> None:
    parts = parts_of(str(JOB_LIST))
    submitter = _emulated(parts)
    jobs = list(parts.workload.jobs)
    assert len(jobs) == 12
    for job in jobs:
        sub = submitter.submission(job, 180.0)
        assert rates_in(sub.command) == {"V100": 1.0, "P100": 1.0, "K80": 1.0}
        assert sub.rates == rates_in(sub.command)  # the decider's prior: not profiled live
        assert sub.steps == job.work  # the duration, in steps of 1 s
        assert sub.job_type == ""  # no Gavel type: no table prior, no refusal
        assert sub.gpus == job.num_gpu and sub.gpu_milli == job.gpu_milli
        assert "--job-type" not in sub.command


def test_an_openb_subset_is_submitted_not_refused() -> None:
    parts = parts_of(f"openb:{OPENB_SUBSET},compress=10", cluster="v100:2,k80:2")
    jobs = _gpu_jobs(finite_jobs(parts), lambda _: None)
    assert len(jobs) == 14 and {j.job_type for j in jobs} == {"openb"}
    submitter = _emulated(parts)
    for job in jobs:
        sub = submitter.submission(job, 180.0)  # a JobSubmission: validated
        assert rates_in(sub.command) == {"V100": 1.0, "K80": 1.0} == sub.rates
        assert sub.steps == job.work > 0


@pytest.mark.slow  # every Gavel job type through the emulated job: seconds of CPU
def test_a_gavel_jobs_rates_are_its_table_rates_the_emulated_job_would_read() -> None:
    parts = parts_of("gavel:jobs=8,rate=0")
    submitter = _emulated(parts)
    for job in parts.workload.jobs:
        sub = submitter.submission(job, 180.0)
        rates = rates_in(sub.command)
        assert sub.job_type == job.job_type and "--job-type" in sub.command
        assert sub.rates == rates
        for model, rate in rates.items():
            table = table_rate(job.job_type, model, max(job.num_gpu, 1)).steps_per_s
            assert rate == pytest.approx(table, rel=1e-12)
            env = {"GPUMOSAIC_GPU_MODEL": model}
            assert rate_of(job.job_type, env, max(job.num_gpu, 1), rates).steps_per_s == rate


def test_a_model_the_job_may_not_use_gets_no_rate() -> None:
    parts = parts_of(str(JOB_LIST))
    submitter = EmulatedJobs(parts.workload.throughputs, (gpu_model("V100"), gpu_model("K80")))
    job = JobSpec(
        id=0, arrival_s=0.0, job_type="job", num_gpu=1, gpu_milli=1000, work=60.0,
        allowed_models=frozenset({"K80"}),
    )  # fmt: skip
    assert submitter.rates(job) == {"K80": 1.0}


def test_a_model_without_a_simulator_rate_is_not_offered_live() -> None:
    """The simulator never runs a job where its rate is 0; live, a model without a known
    rate would be estimated and profiled (and the emulated job has no rate there)."""

    class NoK80:
        def rate(self, job: JobSpec, gpu: object) -> float:
            return 0.0 if getattr(gpu, "name", "") == "K80" else 2.0

    models = (gpu_model("V100"), gpu_model("P100"), gpu_model("K80"))
    submitter = EmulatedJobs(NoK80(), models)  # type: ignore[arg-type]
    job = JobSpec(id=0, arrival_s=0.0, job_type="job", num_gpu=1, gpu_milli=1000, work=60.0)
    sub = submitter.submission(job, 180.0)
    assert sub.rates == {"V100": 2.0, "P100": 2.0} == rates_in(sub.command)
    assert sub.gpu_models == ["P100", "V100"]
    full = EmulatedJobs(parts_of(str(JOB_LIST)).workload.throughputs, models)
    assert full.submission(job, 180.0).gpu_models == []  # every model rated: any


def test_the_emulated_job_steps_at_the_rate_of_the_model_it_landed_on() -> None:
    rates = parse_rates("V100=2.5, k80=0.25")
    assert rates == {"V100": 2.5, "K80": 0.25}
    assert rate_of("", {"GPUMOSAIC_GPU_MODEL": "K80"}, 1, rates).steps_per_s == 0.25
    with pytest.raises(EmulationError, match="no rate for GPU model P100"):
        rate_of("", {"GPUMOSAIC_GPU_MODEL": "P100"}, 1, rates)


@pytest.mark.parametrize("text", ["", "V100", "V100=0", "V100=-1", "V100=nan", "V100=inf",
                                  "V100=x", "=1", "V100=1,V100=2"])  # fmt: skip
def test_bad_rates_are_refused(text: str) -> None:
    with pytest.raises(EmulationError, match="--rates"):
        parse_rates(text)


def test_the_emulated_job_needs_a_type_or_rates(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main([])
    assert exit_.value.code == 2
    assert main(["--rates", "V100=zero"]) == 2
    assert "--rates part 'V100=zero'" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["emulate"], "give --job-type"),
        (["emulate", "--rates", "V100=-1"], "--rates V100=-1"),
    ],
)
def test_emulate_mistakes_are_one_line(args: list[str], words: str) -> None:
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and words in lines[0], lines


def test_cpu_only_jobs_are_left_out_and_said() -> None:
    def job(i: int, num_gpu: int) -> JobSpec:
        return JobSpec(id=i, arrival_s=0.0, job_type="job", num_gpu=num_gpu, gpu_milli=1000,
                       work=60.0)  # fmt: skip

    said: list[str] = []
    kept = _gpu_jobs([job(0, 1), job(1, 0), job(2, 2)], said.append)
    assert [j.id for j in kept] == [0, 2]
    assert said and "1 CPU-only job(s)" in said[0]


def test_a_windows_stream_goes_on_past_the_window_and_only_the_window_is_measured() -> None:
    parts = parts_of("gavel:rate=0.5,window=2-6")
    jobs = finite_jobs(parts)
    assert max(j.id for j in jobs) > 6  # the simulator's stream goes on too
    record = JobRecord(
        job_id=7, name="", job_type="A3C", arrival_s=0.0, start_s=0.0, finish_s=1.0,
        num_gpu=1, gpu_milli=1000, status=JobStatus.COMPLETED,
    )  # fmt: skip
    assert _as_workload_job(record, {7: 3}, 2, 6).measured
    assert not _as_workload_job(record, {7: 6}, 2, 6).measured
    assert _as_workload_job(record, {}, -math.inf, math.inf).measured


@pytest.mark.slow
def test_sim_vs_live_json_on_a_duration_job_list(ray_cluster: object) -> None:
    """Four ``duration_s`` jobs (one a 2-GPU gang, one at 500 milli) on the session's
    Ray (2 V100, 2 K80), time scale 100. Every model runs such a job at the same rate,
    so which job a round favours is a near-tie broken by seconds of launch latency: the
    claim is that both sides complete the same jobs with the JCTs the same size."""
    result = CliRunner().invoke(
        app,
        [
            "sim-vs-live", "--cluster", "v100:2,k80:2", "--workload", str(SMALL_LIST),
            "--policy", "max_min_fairness_perf", "--time-scale", "100", "--json",
        ],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout[result.stdout.index("{") :])
    assert data["sim"]["completed"] == data["live"]["completed"] == 4
    assert data["live"]["finished"] is True
    assert data["time_scale"] == 100.0
    assert abs(data["avg_jct_rel_diff"]) < 0.5 and abs(data["makespan_rel_diff"]) < 0.5
    assert 0 <= data["per_job_rel_diff_median"] < 1.0
    assert data["rounds_identical"] >= 1  # the first round is decided alike


def test_the_replay_ends_only_when_the_decider_has_recorded_each_completion() -> None:
    """The store marks a job done at its last report, the decider at the next tick: the
    records (JCTs) are the decider's, so the replay waits for it (a Gavel window once
    lost its longest job's JCT and the makespan this way)."""
    from types import SimpleNamespace

    import numpy as np

    from gpumosaic.experiments.sim_vs_live.replay import _recorded

    jobs = SimpleNamespace(finish_s=np.array([np.nan, 120.0]))
    driver = SimpleNamespace(row_of={7: 0, 8: 1}, decider=SimpleNamespace(jobs=jobs))
    assert not _recorded(driver, 7)  # type: ignore[arg-type]
    assert _recorded(driver, 8)  # type: ignore[arg-type]
    assert _recorded(driver, 9)  # type: ignore[arg-type]  # never admitted (rejected)
