"""``gpumosaic kernels``: build the ahead-of-time kernel library (``gpumosaic.kernel_aot``).

The kernels and their argument types are learned, not listed: the build runs a short fill
with every placement through numba's JIT (openb's nodes, the first tasks of openb's
default trace, and a weighted combination) and Gavel's continuous experiment over its
first jobs with three policies, and exports every signature a kernel was called with from
Python (its callees are compiled into it). A run whose calls all match (the fill, Gavel's
36:36:36 run with these policies) never imports numba; any other call takes numba's JIT.
numba's ``pycc`` then compiles the same Python sources into one module, for this
machine's CPU model and features: the ones numba's JIT targets here (pycc's default is a
generic CPU), so the AOT code does the same arithmetic (tests/test_kernel_aot.py checks
whole fills and a round run against the JIT's). Building needs numba, setuptools and a C
compiler (it links the module); ~20 s with numba's cache warm, ~60 s cold.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Annotated, Any

import typer

from gpumosaic import kernel_aot, kernel_cache
from gpumosaic.cli.app import app, check_out_dir, err_console, user_errors

# Tasks of openb's default trace each placement fills with to learn the signatures.
LEARNING_TASKS = 400
# A weighted combination (several members) next to every single placement.
COMBINATION = "pwr=200,fgd=800"


# Gavel's continuous experiment (36:36:36, one GPU per server, 3 jobs/h) over its first
# jobs, with the policies whose round kernels it learns.
ROUND_WINDOW = (0, 60)
ROUND_POLICIES = ("max_min_fairness_perf", "max_min_fairness", "fifo")


def learn_signatures() -> list[tuple[kernel_cache.Kernel, Any]]:
    """(kernel, numba signature) of every kernel a fill or Gavel's round mechanism calls
    from Python, in a stable order."""
    from gpumosaic.experiments.reproductions.gavel import CONTINUOUS_CLUSTER, simulate_rounds
    from gpumosaic.model.cluster import ClusterSpec
    from gpumosaic.placement.registry import placement_names
    from gpumosaic.run.fill import fill_replay
    from gpumosaic.traces.openb import load_openb_nodes, load_openb_tasks
    from gpumosaic.workloads.gavel_stream import gavel_stream_workload

    nodes = load_openb_nodes("openb:gpu")
    tasks = load_openb_tasks("openb:default")[:LEARNING_TASKS]
    for placement in (*placement_names(), COMBINATION):
        fill_replay(nodes, tasks, placement, seed=0, inflate=1.3)
    cluster = ClusterSpec.from_counts(CONTINUOUS_CLUSTER, gpus_per_node=1)
    for policy in ROUND_POLICIES:
        workload = gavel_stream_workload(3.0, ROUND_WINDOW, 0)
        simulate_rounds(cluster, CONTINUOUS_CLUSTER, workload, policy, "strided", 0)
    found: list[tuple[kernel_cache.Kernel, Any]] = []
    for kernel in kernel_cache.kernels():
        if kernel.called_from_python:  # its callees are compiled into it
            found.extend((kernel, signature) for signature in kernel.compiled())
    return found


def argument_spec(numba_type: Any) -> list[Any]:
    """A numba argument type as the exports file writes it (``kernel_aot.guard_of``)."""
    from numba.core import types

    if isinstance(numba_type, types.Array):
        if not numba_type.aligned:
            raise TypeError(f"unaligned array {numba_type}")
        return ["array", str(numba_type.dtype), numba_type.ndim, numba_type.layout,
                not numba_type.mutable]  # fmt: skip
    if isinstance(numba_type, types.BaseTuple):
        elements: Any = numba_type
        return ["tuple", [argument_spec(t) for t in elements.types]]
    name = str(numba_type)
    if name in ("bool", "boolean"):
        return ["scalar", "bool"]
    if name in ("int64", "float64"):
        return ["scalar", name]
    raise TypeError(f"no AOT export for argument type {numba_type}")


def build_library(directory: Path | None = None) -> tuple[Path, int, int]:
    """Learn the signatures, compile the library into ``directory`` (default: the keyed
    cache's ``aot``) and write its exports file; (extension path, exports, signatures left
    to numba's JIT: an argument type the exports file cannot spell)."""
    kernel_aot.use_aot_library({})  # learn through the JIT, not an older library
    try:
        learned = learn_signatures()
    finally:
        kernel_aot.use_aot_library(None)
    exports = []
    entries: list[tuple[str, Any, Any]] = []
    left = 0
    for kernel, signature in learned:
        try:
            args = [argument_spec(t) for t in signature.args]
        except TypeError:
            left += 1
            continue
        name = f"k{len(entries)}"
        entries.append((name, kernel, signature))
        exports.append({"kernel": kernel.key, "name": name, "args": args})
    extension, exports_file, module_name = kernel_aot.aot_paths(directory)
    extension.parent.mkdir(parents=True, exist_ok=True)
    _compile(module_name, extension, entries)
    exports_file.write_text(json.dumps({"host": kernel_aot.host_key(), "exports": exports}))
    return extension, len(exports), left


def _compile(module_name: str, extension: Path, entries: list[tuple[str, Any, Any]]) -> None:
    import warnings

    import setuptools  # noqa: F401  # pycc compiles and links through setuptools' build_ext
    from numba.core import codegen
    from numba.core.registry import cpu_target

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # pycc's pending deprecation
        from numba.pycc import CC

    cc = CC(module_name, source_module=__name__)
    cc.output_dir = str(extension.parent)
    cc.output_file = extension.name
    jit_codegen: Any = cpu_target.target_context.codegen()
    # The JIT's CPU model and features (pycc's default is a generic CPU, features from the
    # model only): the same instructions, so the same floating-point results.
    cc.target_cpu = jit_codegen._get_host_cpu_name()
    features = jit_codegen._tm_features
    aot_codegen: Any = codegen.AOTCPUCodegen
    saved = aot_codegen._customize_tm_features
    aot_codegen._customize_tm_features = lambda self: features
    try:
        for name, kernel, signature in entries:
            cc.export(name, signature)(kernel.py_func)
        cc.compile()
    finally:
        aot_codegen._customize_tm_features = saved


@app.command(epilog="Example: gpumosaic kernels   (make runs it after installing)")
@user_errors
def kernels(
    out: Annotated[
        Path | None, typer.Option(help="folder for the library (default: the kernel cache)")
    ] = None,
    strict: Annotated[
        bool, typer.Option("--strict", help="(the default now: a failed build exits 1)")
    ] = True,
) -> None:
    """Build the ahead-of-time kernel library: the fill's kernels without numba's ~0.6 s
    start-up (numba's JIT runs them, with the same results, where it is missing).

    A build that fails says why and exits 1 (``make`` then goes on with the JIT and tries again
    next time)."""
    check_out_dir(out)
    started = time.perf_counter()
    try:
        extension, count, left = build_library(out)
    except Exception as err:  # a missing compiler or pycc: say so, the JIT still works
        err_console.print(
            f"[yellow]the ahead-of-time kernel library was not built[/yellow] "
            f"({type(err).__name__}: {err}); the kernels run through numba's JIT "
            "(~0.6 s more per command)",
            highlight=False,
            soft_wrap=True,
        )
        sys.exit(1)
    also = f"; {left} signature(s) with types it cannot take stay on numba's JIT" if left else ""
    print(f"built {extension} ({count} exports{also}) in {time.perf_counter() - started:.0f} s")
