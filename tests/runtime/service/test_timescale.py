"""The time-scaled clock, the simulator's launch latency and the emulated job's rate."""

from __future__ import annotations

import numpy as np
import pytest

from gpumosaic.mechanisms.rounds.sim import RoundConfig, RoundSimulator
from gpumosaic.model.cluster import ClusterSpec
from gpumosaic.model.job import JobSpec
from gpumosaic.placement.registry import build_placement
from gpumosaic.placement.workload import TargetWorkload
from gpumosaic.policies.registry import build_policy
from gpumosaic.runtime.emulate import EmulationError, column_rate, rate_of, table_rate
from gpumosaic.runtime.executors.launch import table_column
from gpumosaic.runtime.timescale import ScaledClock
from gpumosaic.workloads.throughputs import GavelThroughputTable
from gpumosaic.workloads.workload import Workload


class Wall:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_job_time_runs_scale_times_faster_except_while_held() -> None:
    wall = Wall()
    clock = ScaledClock(50.0, wall)
    start = clock()
    wall.t += 2.0
    assert clock() - start == pytest.approx(100.0)  # 2 s of wall = 100 s of job time
    with clock.held():
        wall.t += 0.5  # the service deciding: wall speed
        assert clock() - start == pytest.approx(100.5)
    wall.t += 1.0
    assert clock() - start == pytest.approx(150.5)
    assert clock.wall_seconds(100.0) == pytest.approx(2.0)


@pytest.mark.parametrize("bad", [0.5, float("nan"), float("inf"), 1e9])
def test_a_time_scale_out_of_range_is_refused(bad: float) -> None:
    with pytest.raises(ValueError, match="between 1 and"):
        ScaledClock(bad)


def simulate(latency_s: float) -> tuple[float, float]:
    """One job of 3,600 steps at 2 steps/s alone on one GPU, rounds of 600 s."""
    job = JobSpec(id=0, arrival_s=0.0, job_type="A3C", num_gpu=1, gpu_milli=1000, work=3600.0)

    class Two:
        def rate(self, job: JobSpec, gpu: object) -> float:
            return 2.0

    workload = Workload("one", [job], Two())  # type: ignore[arg-type]
    rng = np.random.default_rng(0)
    target = TargetWorkload.from_jobs([job])
    sim = RoundSimulator(
        ClusterSpec.from_counts([("v100", 1)]),
        workload,
        build_policy("max_min_fairness_perf", rng=rng),
        build_placement("strided", target),
        RoundConfig(600.0, 1920.0),
        rng=rng,
        target=target,
        launch_latency_s=latency_s,
    )
    result = sim.run()
    record = result.records[0]
    return record.finish_s, float(sim.rounds)


def test_the_simulated_launch_latency_costs_only_new_leases() -> None:
    finish, rounds = simulate(0.0)
    assert finish == pytest.approx(1800.0) and rounds == 3  # 3 x 1,200 steps
    late, late_rounds = simulate(30.0)
    # The first lease starts 30 s late (1,140 steps in its round); the extensions that
    # follow keep the process: 1,200 + 1,200, then 60 steps in a fourth round.
    assert late == pytest.approx(1830.0) and late_rounds == 4


def test_the_emulated_rate_is_the_table_rate_with_or_without_numpy() -> None:
    table = GavelThroughputTable.load()
    want = table.isolated("ResNet-50 (batch size 64)", 1, "k80")
    column, factor = table_column("K80")
    env = {"GPUMOSAIC_GPU_MODEL": "K80", "GPUMOSAIC_GPU_TABLE_COLUMN": f"{column}:{factor!r}"}
    assert rate_of("ResNet-50 (batch size 64)", env, 1).steps_per_s == want
    assert table_rate("ResNet-50 (batch size 64)", "K80", 1).steps_per_s == want
    assert column_rate("A3C", "v100", 1.5, 1, "G3").steps_per_s == pytest.approx(
        1.5 * table.isolated("A3C", 1, "v100")
    )
    assert table_column("G3") == ("v100", 1.5)  # borrowed, as the simulator's gavel workloads
    with pytest.raises(EmulationError, match="no rate"):
        rate_of("no such job", env, 1)
    assert np.isfinite(want)
