"""Background load: a pre-filled cluster that an operator's jobs then meet."""

import numpy as np
import pytest

from gpumosaic.errors import InputError
from gpumosaic.model.cluster import ClusterSpec
from gpumosaic.model.job import JobSpec
from gpumosaic.model.state import ClusterState
from gpumosaic.placement.background import BackgroundSpec, prefill
from gpumosaic.placement.registry import build_placement
from gpumosaic.placement.workload import TargetWorkload


def tasks(milli: int, count: int) -> list[JobSpec]:
    return [JobSpec(i, 0.0, "t", 1, milli, 1.0) for i in range(count)]


def fill(milli: int, count: int, fraction: float, gpus: int = 4):
    state = ClusterState(ClusterSpec.from_counts([("v100", gpus)]))
    jobs = tasks(milli, count)
    strategy = build_placement("bestfit", TargetWorkload.from_jobs(jobs))
    load = prefill(state, jobs, strategy, fraction, np.random.default_rng(0), "t")
    return state, load


def test_fills_to_the_target_fraction_and_stops() -> None:
    # 4 GPUs = 4000 milli; 500-milli tasks: 50% is reached after exactly 4 tasks.
    state, load = fill(500, 20, 0.5)
    assert load.placed == 4 and load.allocated_milli == 2000
    assert state.allocated_gpu_milli == 2000 and load.fraction == pytest.approx(0.5)
    # Background tasks carry negative ids: they never collide with the run's jobs.
    assert all(job_id < 0 for job_id in state.assignments)


def test_reuses_tasks_until_the_target_and_stops_when_nothing_fits() -> None:
    # Two 700-milli tasks in the list, target 100%: one fits per GPU (4 placed, reusing
    # the list), then a whole pass places nothing and the fill stops below the target.
    state, load = fill(700, 2, 1.0)
    assert load.placed == 4 and load.allocated_milli == 2800
    assert load.skipped >= 2 and load.fraction == pytest.approx(0.7)
    assert (state.gpu_free >= 0).all()


@pytest.mark.parametrize(
    ("text", "source", "fraction"),
    [("openb:default", "openb:default", 0.8), ("openb:default,fraction=0.5", "openb:default", 0.5)],
)
def test_spec(text: str, source: str, fraction: float) -> None:
    spec = BackgroundSpec.parse(text)
    assert (spec.source, spec.fraction) == (source, fraction)


@pytest.mark.parametrize("text", ["openb:default,fraction=2", "openb:default,fill=1", ","])
def test_bad_spec_names_the_flag(text: str) -> None:
    with pytest.raises(InputError, match="--background"):
        BackgroundSpec.parse(text)
