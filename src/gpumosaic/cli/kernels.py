"""``gpumosaic kernels``: build the ahead-of-time kernel library (``gpumosaic.kernel_aot``).

A build compiles the declared exports (``data/kernel_exports.json``) with numba's ``pycc``,
one module per group of kernels, the groups in parallel (``kernel_build``), into a user
cache keyed by the kernel sources' hash: a second clone of the same sources finds it
built. ``--learn`` rewrites the declared exports: a short fill with every placement
(openb's nodes, the first tasks of openb's default trace, and a weighted combination) and
Gavel's continuous experiment over its first jobs with three policies, through numba's
JIT, and every signature a kernel was called with from Python (its callees are compiled
into it). Run it after changing a kernel's argument types: a call whose types no export
has takes numba's JIT (same results; ``--json`` says ``aot+jit``).
The modules are built for this machine's CPU model and features: the ones numba's JIT
targets here (pycc's default is a generic CPU), so the AOT code does the same arithmetic
(tests/test_kernel_aot.py checks whole fills and a round run against the JIT's). Building
needs numba, setuptools and a C compiler (it links the module).
"""

from __future__ import annotations

import os
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


def learned_exports() -> list[dict[str, Any]]:
    """The exports a learning run finds, as ``data/kernel_exports.json`` declares them."""
    from gpumosaic.kernel_build import type_spec

    kernel_cache.use_aot_library({})  # learn through the JIT, not an older library
    try:
        learned = learn_signatures()
    finally:
        kernel_cache.use_aot_library(None)
    exports = []
    for kernel, signature in learned:
        try:
            args = [type_spec(t) for t in signature.args]
            returns = type_spec(signature.return_type)
        except TypeError:
            continue  # a type the exports file cannot spell: numba's JIT keeps it
        exports.append({"kernel": kernel.key, "args": args, "returns": returns})
    return exports


@app.command(epilog="Example: gpumosaic kernels   (make runs it after installing)")
@user_errors
def kernels(
    out: Annotated[
        Path | None, typer.Option(help="folder for the library (default: the kernel cache)")
    ] = None,
    group: Annotated[
        str,
        typer.Option(help="comma-separated groups to build: placement, rounds"),
    ] = ",".join(kernel_aot.GROUPS),
    if_missing: Annotated[
        bool, typer.Option("--if-missing", help="build only the groups not built yet")
    ] = False,
    workers: Annotated[int, typer.Option(help="processes compiling at once (0: one per CPU)")] = 0,
    learn: Annotated[
        bool,
        typer.Option("--learn", help="rewrite the declared exports from a learning run first"),
    ] = False,
    strict: Annotated[
        bool, typer.Option("--strict", help="(the default now: a failed build exits 1)")
    ] = True,
) -> None:
    """Build the ahead-of-time kernel library: the kernels without numba's ~0.6 s start-up
    (numba's JIT runs them, with the same results, where it is missing).

    A build that fails says why and exits 1 (``make`` then goes on with the JIT and tries again
    next time)."""
    from gpumosaic import kernel_build

    check_out_dir(out)
    groups = [g.strip() for g in group.split(",") if g.strip()]
    unknown = [g for g in groups if g not in kernel_aot.GROUPS]
    if unknown:
        raise typer.BadParameter(
            f"unknown group {unknown[0]!r} (known: {', '.join(kernel_aot.GROUPS)})",
            param_hint="--group",
        )
    if if_missing:
        groups = kernel_aot.missing_groups(groups, out)
        if not groups:
            return
    started = time.perf_counter()
    try:
        if learn:
            exports = learned_exports()
            kernel_build.write_exports(exports)
            print(f"wrote {len(exports)} exports to {kernel_build.EXPORTS_FILE}")
        processes = min(len(groups), workers or os.cpu_count() or 1)
        expected = kernel_build.expected_wall_s(groups, processes)
        where = out or kernel_aot.aot_dir()
        err_console.print(
            f"compiling the ahead-of-time kernels ({', '.join(groups)}) on {processes} "
            f"process(es), up to about {expected:.0f} s on a 2-core machine, once per "
            f"kernel version, into {where} ...",
            highlight=False,
            soft_wrap=True,
        )
        count = kernel_build.build(groups, out, workers or None)
    except Exception as err:  # a missing compiler or pycc: say so, the JIT still works
        err_console.print(
            f"[yellow]the ahead-of-time kernel library was not built[/yellow] "
            f"({type(err).__name__}: {err}); the kernels run through numba's JIT "
            "(~0.6 s more per command)",
            highlight=False,
            soft_wrap=True,
        )
        sys.exit(1)
    print(f"built {count} exports ({', '.join(groups)}) in {time.perf_counter() - started:.0f} s")
