"""Building the ahead-of-time kernel library (``gpumosaic.kernel_aot``): the declared
exports compiled by numba's ``pycc``, one extension module per group, the groups in
parallel processes.

The exports (kernel, argument and return types) are declared in
``data/kernel_exports.json``, written by ``gpumosaic kernels --learn`` (a fill with every
placement and Gavel's rounds through numba's JIT, ``cli/kernels.py``): a build compiles
only them, never through the JIT first (that learning run was ~90 s of CPU of every
fresh build). A group is the kernels one kind of command runs (``GROUPS``), so ``make
demo`` builds only what the event simulator and the fill call. Each group's module is
written to a temporary name and renamed into place, so clones building at once never
load a half-written file.
"""

from __future__ import annotations

import importlib
import json
import os
import shutil
import tempfile
import warnings
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from multiprocessing import get_context
from pathlib import Path
from typing import Any

import numpy as np

from gpumosaic import kernel_aot, kernel_cache

EXPORTS_FILE = kernel_cache.PACKAGE_ROOT / "data" / "kernel_exports.json"

# CPU seconds of each group's build from a cold numba cache on the project's 2-core
# machine (for the line a build prints before it starts; measured under load, so an
# upper bound: docs/performance.md).
EXPECTED_CPU_S = {"placement": 50.0, "rounds": 60.0}


def declared_exports() -> list[dict[str, Any]]:
    """The declared exports: ``{"kernel", "args", "returns"}`` each (type specs as
    ``kernel_aot.guard_of`` reads them)."""
    exports: list[dict[str, Any]] = json.loads(EXPORTS_FILE.read_text())["exports"]
    return exports


def write_exports(exports: list[dict[str, Any]]) -> None:
    """Declare ``exports`` (one a line, so that a change reads as a diff of lines)."""
    lines = ",\n".join(json.dumps(e) for e in exports)
    EXPORTS_FILE.write_text(f'{{"exports": [\n{lines}\n]}}\n')


def expected_wall_s(groups: list[str], workers: int) -> float:
    """Roughly how long building ``groups`` on ``workers`` processes takes here."""
    cpu = sorted((EXPECTED_CPU_S.get(g, 20.0) for g in groups), reverse=True)
    if not cpu:
        return 0.0
    return max(cpu[0], sum(cpu) / max(1, min(workers, len(cpu))))


def build(groups: list[str], directory: Path | None = None, workers: int | None = None) -> int:
    """Compile ``groups`` of the declared exports into ``directory`` (default
    ``kernel_aot.aot_dir()``), one process per group at most ``workers`` at a time (default:
    the CPUs); the number of exports built."""
    directory = directory or kernel_aot.aot_dir()
    directory.mkdir(parents=True, exist_ok=True)
    exports = declared_exports()
    jobs = [(g, [e for e in exports if kernel_aot.group_of(e["kernel"]) == g]) for g in groups]
    jobs = [(g, entries) for g, entries in jobs if entries]
    workers = min(len(jobs), workers or os.cpu_count() or 1)
    if workers <= 1:
        for group, entries in jobs:
            build_group(group, entries, directory)
    else:  # spawned: numba is not forked half-initialized
        with ProcessPoolExecutor(workers, mp_context=get_context("spawn")) as pool:
            for done in [pool.submit(build_group, g, e, directory) for g, e in jobs]:
                done.result()
    return sum(len(entries) for _, entries in jobs)


def build_group(group: str, entries: list[dict[str, Any]], directory: Path) -> None:
    """Compile one group's exports into its extension module and exports file."""
    for module in {e["kernel"].rsplit(".", 1)[0] for e in entries}:
        importlib.import_module(module)  # defines its kernels
    by_key = {k.key: k for k in kernel_cache.kernels()}
    kernel_cache._make_dispatchers()  # numba types a kernel's callees as dispatchers
    extension, exports_file, module_name = kernel_aot.aot_paths(directory, group)
    compiled = []
    with tempfile.TemporaryDirectory(dir=directory) as scratch:
        signed = []
        for i, entry in enumerate(entries):
            name = f"k{i}"
            args = [numba_type(a) for a in entry["args"]]
            signed.append((name, by_key[entry["kernel"]], numba_type(entry["returns"])(*args)))
            compiled.append({"kernel": entry["kernel"], "name": name, "args": entry["args"]})
        built = Path(scratch) / extension.name
        _compile(module_name, built, signed)
        os.replace(built, extension)
    listed = {"host": kernel_aot.host_key(), "exports": compiled}
    temporary = exports_file.with_suffix(f".{os.getpid()}.tmp")
    temporary.write_text(json.dumps(listed))
    os.replace(temporary, exports_file)  # last: a listed module is a whole one


def numba_type(spec: Any) -> Any:
    """The numba type of a spec of the exports file (the inverse of ``type_spec``)."""
    from numba.core import types
    from numba.np.numpy_support import from_dtype

    kind = spec[0]
    if kind == "array":
        _, dtype, ndim, layout, readonly = spec
        return types.Array(from_dtype(np.dtype(dtype)), ndim, layout, readonly=readonly)
    if kind == "tuple":
        return types.Tuple([numba_type(s) for s in spec[1]])  # homogeneous: a UniTuple
    if kind == "none":
        return types.none
    return {"int64": types.int64, "bool": types.boolean, "float64": types.float64}[spec[1]]


def type_spec(numba_type: Any) -> list[Any]:
    """A numba argument or return type as the exports file writes it."""
    from numba.core import types

    if isinstance(numba_type, types.Array):
        if not numba_type.aligned:
            raise TypeError(f"unaligned array {numba_type}")
        return ["array", str(numba_type.dtype), numba_type.ndim, numba_type.layout,
                not numba_type.mutable]  # fmt: skip
    if isinstance(numba_type, types.BaseTuple):
        elements: Any = numba_type
        return ["tuple", [type_spec(t) for t in elements.types]]
    if numba_type == types.none:
        return ["none"]
    name = str(numba_type)
    if name in ("bool", "boolean"):
        return ["scalar", "bool"]
    if name in ("int64", "float64"):
        return ["scalar", name]
    raise TypeError(f"no AOT export for type {numba_type}")


def _compile(module_name: str, extension: Path, entries: list[tuple[str, Any, Any]]) -> None:
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
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for name, kernel, signature in entries:
                cc.export(name, signature)(kernel.py_func)
            _compile_module(cc)
    finally:
        aot_codegen._customize_tm_features = saved


def _compile_module(cc: Any) -> None:
    """pycc's ``CC.compile``, with its C helpers (numba's runtime and helper library, ~7 s
    of the C compiler) compiled in a thread while numba compiles the kernels, not after."""
    build_dir = tempfile.mkdtemp(prefix=f"pycc-build-{cc._basename}-")
    try:
        with ThreadPoolExecutor(1) as pool:
            mixins = pool.submit(cc._compile_mixins, build_dir)
            objects, dll_exports = cc._compile_object_files(build_dir)
            objects += mixins.result()
        cc._toolchain.link_shared(
            os.path.join(cc._output_dir, cc._output_file),
            objects,
            cc._toolchain.get_python_libraries(),
            cc._toolchain.get_python_library_dirs(),
            export_symbols=dll_exports,
            extra_ldflags=cc._get_extra_ldflags(),
        )
    finally:
        shutil.rmtree(build_dir, ignore_errors=True)
