"""The ahead-of-time kernel library (``gpumosaic.kernel_aot``) and how ``kernel_cache``
uses it: numba stays unimported until a kernel needs it, argument types are checked before
an AOT call, and an AOT fill is the JIT's fill bit for bit."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from gpumosaic import kernel_aot, kernel_cache
from gpumosaic.kernel_aot import guard_of

SRC = Path(kernel_cache.__file__).resolve().parent.parent


def test_the_fill_imports_no_numba_until_a_kernel_runs() -> None:
    code = (
        "import sys; import gpumosaic.placement.kernel, gpumosaic.mechanisms.fill.simulator, "
        "gpumosaic.mechanisms.rounds.kernel; print('numba' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], env={"PYTHONPATH": str(SRC)}, capture_output=True,
        text=True, check=True,
    ).stdout.strip()  # fmt: skip
    assert out == "False"


ARRAY_I64 = ["array", "int64", 1, "C", False]
ARRAY_I32_2D = ["array", "int32", 2, "C", False]
READONLY_BOOL = ["array", "bool", 1, "C", True]


def _readonly(a: np.ndarray) -> np.ndarray:
    a.flags.writeable = False
    return a


@pytest.mark.parametrize(
    ("spec", "value", "expected"),
    [
        (ARRAY_I64, np.zeros(3, dtype=np.int64), True),
        (ARRAY_I64, np.zeros(3, dtype=np.int32), False),  # dtype
        (ARRAY_I64, np.zeros((3, 1), dtype=np.int64), False),  # ndim
        (ARRAY_I64, np.zeros(6, dtype=np.int64)[::2], False),  # layout A, not C
        (ARRAY_I64, _readonly(np.zeros(3, dtype=np.int64)), False),  # read-only
        (ARRAY_I64, np.zeros(3, dtype=">i8"), False),  # byte order
        (ARRAY_I64, [0, 0, 0], False),  # not an array
        (READONLY_BOOL, _readonly(np.zeros(3, dtype=bool)), True),
        (READONLY_BOOL, np.zeros(3, dtype=bool), False),  # writable is another type
        (ARRAY_I32_2D, np.zeros((2, 3), dtype=np.int32), True),
        (ARRAY_I32_2D, np.zeros((2, 3), dtype=np.int32, order="F"), False),
        (["scalar", "int64"], 3, True),
        (["scalar", "int64"], np.int64(3), True),
        (["scalar", "int64"], True, False),  # a bool is numba's boolean
        (["scalar", "int64"], np.int32(3), False),
        (["scalar", "int64"], 3.0, False),
        (["scalar", "bool"], False, True),
        (["scalar", "bool"], np.bool_(False), True),
        (["scalar", "float64"], 1.5, True),
        (["tuple", [["scalar", "int64"], ARRAY_I64]], (1, np.zeros(2, dtype=np.int64)), True),
        (["tuple", [["scalar", "int64"], ARRAY_I64]], (1,), False),
        (["tuple", [["scalar", "int64"], ARRAY_I64]], [1, np.zeros(2, dtype=np.int64)], False),
    ],
)
def test_a_guard_accepts_exactly_the_numba_types_of_an_export(
    spec: list[Any], value: object, expected: bool
) -> None:
    assert guard_of(["tuple", [spec]])((value,)) is expected


def test_a_kernel_outside_the_library_runs_through_numba() -> None:
    from gpumosaic.placement import kernel

    values = np.arange(10.0)
    assert kernel.pairwise_sum(values, 0, 10) == values.sum()
    assert kernel_cache.resolve(kernel.pairwise_sum, values, 0, 10) is kernel_cache.jit(
        kernel.pairwise_sum
    )


def _fill(placement: str, tasks: int) -> Any:
    from gpumosaic.run.fill import fill_replay
    from gpumosaic.traces.openb import load_openb_nodes, load_openb_tasks

    nodes = load_openb_nodes("openb:gpu")
    return fill_replay(nodes, load_openb_tasks("openb:default")[:tasks], placement, 7, 1.3)


FILL_ARRAYS = (
    "arrived_pct", "allocation_rate_pct", "fragmentation_rate_pct", "fragmentation_pct",
    "power_gpu_w", "power_cpu_w", "fail_reason", "task_kind",
)  # fmt: skip


@pytest.mark.slow
def test_an_aot_fill_is_the_jit_fill_bit_for_bit(tmp_path: Path) -> None:
    """Builds the library (~30-60 s: pycc compiles every declared export), then fills and runs
    Gavel's rounds with it and with numba's JIT: every curve and every task's outcome
    equal, for the compiled scorers, a combination, Random and fgd-exact (object mode: the
    JIT's); the same JCTs, rounds and solves."""
    from gpumosaic.placement import kernel
    from gpumosaic.placement.registry import build_placement
    from gpumosaic.placement.workload import TargetWorkload
    from gpumosaic.traces.openb import load_openb_tasks

    # As `make` builds it: a fresh process learns what a fill calls.
    built = subprocess.run(
        [sys.executable, "-m", "gpumosaic", "kernels", "--out", str(tmp_path), "--strict"],
        env={**os.environ, "PYTHONPATH": str(SRC)}, capture_output=True, text=True,
        check=False,
    )  # fmt: skip
    assert built.returncode == 0, built.stderr
    library = kernel_aot.load_library(tmp_path)
    assert set(library) >= {  # the fill's entry points, and the round mechanism's
        "gpumosaic.placement.kernel.step.place_run",
        "gpumosaic.placement.kernel.random.random_feasible",
        "gpumosaic.placement.kernel.random.random_node",
        "gpumosaic.placement.kernel.random.nth_fitting_gpu",
        "gpumosaic.results.timeline.kernel.replay_samples",
        "gpumosaic.mechanisms.rounds.round_kernel.round_singles",
        "gpumosaic.mechanisms.rounds.round_kernel.account_round",
    }
    assert f"built {sum(len(v) for v in library.values())} exports" in built.stdout
    placements = ("fgd", "bestfit", "pwr=200,fgd=800", "random", "fgdexact")
    kernel_cache.use_aot_library({})  # numba's JIT only
    jit = {p: _fill(p, 3000) for p in placements}
    jit_rounds = _gavel_rounds()
    kernel_cache.use_aot_library(library)
    try:
        # The compiled scorers' kernel comes from the library (a pycc function), fgd-exact's
        # from numba.
        from gpumosaic.model.state import ClusterState
        from gpumosaic.traces.openb import load_openb_nodes

        tasks = load_openb_tasks("openb:default")[:50]
        state = ClusterState(load_openb_nodes("openb:gpu"))
        rng = np.random.default_rng(0)
        for name, from_library in (("fgd", True), ("fgdexact", False)):
            strategy: Any = build_placement(name, TargetWorkload.from_jobs(tasks))
            strategy.choose(state, tasks[0], rng)
            run = next(iter(strategy._shapes.values())).run
            assert (run is kernel_cache.jit(kernel.place_run)) is not from_library
        aot = {p: _fill(p, 3000) for p in placements}
        aot_rounds = _gavel_rounds()
    finally:
        kernel_cache.use_aot_library(None)
    for p in placements:
        for field in FILL_ARRAYS:
            np.testing.assert_array_equal(getattr(aot[p], field), getattr(jit[p], field))
    assert aot_rounds == jit_rounds


@pytest.mark.slow
def test_the_declared_exports_are_what_a_learning_run_finds() -> None:
    """``data/kernel_exports.json`` (what a build compiles) is what a fill with every
    placement and Gavel's rounds call from Python: a kernel change that changes a call's
    types is caught here, not by a run falling back to the JIT (`gpumosaic kernels --learn`
    rewrites the file)."""
    from gpumosaic.kernel_build import declared_exports

    # In a fresh process, as `gpumosaic kernels --learn` runs it: a kernel's compiled
    # signatures are those of every call in its process, and the tests before this one (in
    # the same pytest worker) call kernels from Python that no fill or round calls.
    learn = (
        "import json; from gpumosaic.cli.kernels import learned_exports; "
        "print(json.dumps(learned_exports()))"
    )
    done = subprocess.run(
        [sys.executable, "-c", learn], capture_output=True, text=True, timeout=600, check=False
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == declared_exports()


def _gavel_rounds() -> tuple[object, ...]:
    """Gavel's continuous run (another seed and window than the build learned from): the
    JCT, makespan, jobs done, rounds and solves."""
    from gpumosaic.experiments.reproductions.gavel import (
        CONTINUOUS_CLUSTER,
        repro_figures,
        simulate_rounds,
    )
    from gpumosaic.model.cluster import ClusterSpec
    from gpumosaic.workloads.gavel_stream import gavel_stream_workload

    cluster = ClusterSpec.from_counts(CONTINUOUS_CLUSTER, gpus_per_node=1)
    workload = gavel_stream_workload(3.0, (100, 200), 1)
    policy = "max_min_fairness_perf"
    result = simulate_rounds(cluster, CONTINUOUS_CLUSTER, workload, policy, "strided", 1)
    return (*repro_figures(result), result.stats.rounds, result.stats.policy_solves)


def test_a_library_that_does_not_load_warns_and_leaves_the_jit(tmp_path: Path) -> None:
    extension, exports, _ = kernel_aot.aot_paths(tmp_path)
    extension.write_bytes(b"not a shared object")
    exports.write_text(json.dumps({"host": kernel_aot.host_key(), "exports": []}))
    with pytest.warns(RuntimeWarning, match="does not load"):
        assert kernel_aot.load_library(tmp_path) == {}
    exports.write_text(json.dumps({"host": "another CPU", "exports": []}))
    assert kernel_aot.load_library(tmp_path) == {}  # built elsewhere: not tried


def test_a_failed_build_exits_1_and_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    from gpumosaic import kernel_build
    from gpumosaic.cli import app

    def fail(*_args: object) -> None:
        raise OSError("no C compiler")

    monkeypatch.setattr(kernel_build, "build", fail)
    result = CliRunner().invoke(app, ["kernels"])
    assert result.exit_code == 1
    assert "was not built" in result.stderr and "no C compiler" in result.stderr


def test_json_says_whether_the_aot_library_or_the_jit_ran() -> None:
    """``kernels_ran``: the JIT when the library is kept out (``use_aot_library({})``)."""
    from gpumosaic.run.fill import fill_replay
    from gpumosaic.traces.openb import load_openb_nodes, load_openb_tasks

    kernel_cache.use_aot_library({})
    try:
        for kernel in kernel_cache.kernels():
            kernel.forget_aot()
        tasks = load_openb_tasks("openb:default")[:50]
        fill_replay(load_openb_nodes("openb:gpu"), tasks, "fgd", 1, 1.0)
        assert kernel_cache.kernels_ran() == "jit"
    finally:
        kernel_cache.use_aot_library(None)


def test_simulate_and_fill_json_name_what_ran_the_kernels() -> None:
    from typer.testing import CliRunner

    from gpumosaic.cli import app

    runner = CliRunner()
    simulate = runner.invoke(
        app, ["simulate", "--cluster", "v100:2", "--workload", "gavel:jobs=4,rate=0", "--json"]
    )
    assert json.loads(simulate.stdout)["kernels"] in ("aot", "jit", "aot+jit")
    fill = runner.invoke(app, ["fill", "--placement", "bestfit", "--inflate", "0.05", "--json"])
    assert fill.exit_code == 0, fill.output
    assert json.loads(fill.stdout)["kernels"] in ("aot", "jit", "aot+jit")
