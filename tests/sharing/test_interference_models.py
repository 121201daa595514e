"""Interference models on small cases, and the spec parser."""

from __future__ import annotations

import numpy as np
import pytest

from gpumosaic.errors import InputError
from gpumosaic.model.job import JobSpec
from gpumosaic.sharing import (
    CoLocatedJob,
    MeasuredInterference,
    NoInterference,
    ParametricInterference,
    build_interference,
)


class FakeTable:
    """Two job types measured on 'v100'; a packs with b at (6, 3) steps/s."""

    def isolated(self, job_type: str, scale_factor: int, gpu_type: str) -> float:
        return {"a": 10.0, "b": 5.0}[job_type]

    def packed(
        self, job_type_a: str, sf_a: int, job_type_b: str, sf_b: int, gpu_type: str
    ) -> tuple[float, float] | None:
        pairs = {("a", "b"): (6.0, 3.0), ("b", "a"): (3.0, 6.0)}
        return pairs.get((job_type_a, job_type_b)) if gpu_type == "v100" else None


A, B, C = CoLocatedJob("a"), CoLocatedJob("b"), CoLocatedJob("c")


def test_none_is_ideal() -> None:
    assert NoInterference().speed_factors([A, B, C]).tolist() == [1.0, 1.0, 1.0]


def test_parametric_contention_by_hand() -> None:
    model = ParametricInterference(alpha=0.0, busy=1.0)
    assert model.speed_factors([A]).tolist() == [1.0]
    # Two full-GPU jobs: demand 2 -> half speed each.
    assert model.speed_factors([A, B]) == pytest.approx([0.5, 0.5])
    # Shares that sum to <= 1 fit in each other's idle time: no slowdown.
    halves = [CoLocatedJob("x", gpu_share=0.5), CoLocatedJob("y", gpu_share=0.4)]
    assert model.speed_factors(halves) == pytest.approx([1.0, 1.0])
    # Context overhead alpha per extra co-runner: 3 jobs at alpha 0.1 -> 1 / (3 * 1.2).
    model = ParametricInterference(alpha=0.1, busy=1.0)
    assert model.speed_factors([A, B, C]) == pytest.approx([1 / 3.6] * 3)


def test_parametric_default_matches_two_busy_jobs() -> None:
    # Default busy 0.85: two whole-GPU jobs need 1.7 GPUs -> 1/1.7 each (Gavel P100 median).
    assert ParametricInterference().speed_factors([A, B]) == pytest.approx([1 / 1.7] * 2)


def test_colocated_job_from_spec() -> None:
    job = JobSpec(1, 0.0, "a", num_gpu=1, gpu_milli=500, work=1.0, gpu_time_fraction=0.5)
    assert CoLocatedJob.from_spec(job).gpu_share == pytest.approx(0.25)


def test_measured_pair_and_counted_fallbacks() -> None:
    fallback = ParametricInterference(alpha=0.0, busy=1.0)
    model = MeasuredInterference(FakeTable(), fallback)
    assert model.speed_factors([A, B], gpu_key="v100") == pytest.approx([0.6, 0.6])
    assert model.speed_factors([B, A], gpu_key="v100") == pytest.approx([0.6, 0.6])
    assert model.fallbacks == 0
    assert model.speed_factors([A, C], gpu_key="v100") == pytest.approx([0.5, 0.5])  # unknown
    assert model.speed_factors([A, B], gpu_key="k80") == pytest.approx([0.5, 0.5])  # no column
    assert model.speed_factors([A, B, A], gpu_key="v100") == pytest.approx([1 / 3] * 3)
    assert model.speed_factors([A], gpu_key="v100").tolist() == [1.0]  # alone: no lookup
    assert (model.fallbacks, model.lookups) == (3, 5)


def test_measured_reads_gavel_table() -> None:
    model = build_interference("measured")
    assert isinstance(model, MeasuredInterference)
    job = CoLocatedJob("ResNet-18 (batch size 16)")
    speeds = model.speed_factors([job, job], gpu_key="p100")
    assert model.fallbacks == 0
    assert np.all((speeds > 0) & (speeds <= 1.0 + 1e-9))


def test_build_interference_specs() -> None:
    assert isinstance(build_interference("none"), NoInterference)
    model = build_interference(" Parametric:alpha=0.1, busy=0.9 ")
    assert isinstance(model, ParametricInterference)
    assert (model.alpha, model.busy) == (0.1, 0.9)
    fake = build_interference("measured:alpha=0.2", table=FakeTable())
    assert isinstance(fake, MeasuredInterference) and fake.fallback.alpha == 0.2


@pytest.mark.parametrize(
    "spec",
    [
        "bogus",
        "none:alpha=1",
        "parametric:alpha",
        "parametric:alpha=x",
        "parametric:beta=1",
        "parametric:alpha=-1",
        "parametric:busy=0",
    ],
)
def test_build_interference_rejects(spec: str) -> None:
    with pytest.raises(InputError):
        build_interference(spec, table=FakeTable())


@pytest.mark.parametrize(
    "spec", ["capd", "none:x=1", "capped:x=1", "parametric:busy=2", "nvshare:tq=0", "gandiva"]
)
def test_the_grammar_refuses_what_the_build_refuses(spec: str) -> None:
    # sharing/spec.py is the one --sharing grammar: checked alone (no numpy) or built.
    from gpumosaic.errors import InputError
    from gpumosaic.sharing.spec import parse_sharing
    from gpumosaic.sharing.speed import build_speed_model

    with pytest.raises(InputError) as built:
        build_speed_model(spec)
    with pytest.raises(InputError) as parsed:
        parse_sharing(spec)
    assert str(parsed.value) == str(built.value)
