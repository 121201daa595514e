"""The ahead-of-time (AOT) kernel library: the kernels a fill runs, as one extension module
that loads without numba (``kernel_cache`` says why and how a kernel uses it). Here: where
it lives, reading it, checking a call's argument types against an export's, and building it.

    python -m gpumosaic.kernel_aot        # what ``make`` runs after installing

The kernels and their argument types are learned, not listed: the build runs a short fill
with every placement through numba's JIT (openb's nodes, the first tasks of openb's
default trace, and one with a weighted combination) and exports every signature those
runs compiled. numba's ``pycc`` then compiles the same Python sources into one module,
for this machine's CPU model and features (the ones numba's JIT targets here, so the AOT
code does the same arithmetic: tests/test_kernel_aot.py checks whole fills against the
JIT bit for bit). It lands in the kernels' keyed cache directory with a JSON list of its
exports (kernel, exported name, argument types); a change to any kernel source moves the
directory, and the kernels run through numba's JIT until the library is built again.
Building needs numba and a C compiler (it links the module); ~20-40 s.

An AOT function trusts its arguments to have the types it was compiled for (a wrong dtype
reads memory as another type), so every call is checked against the exports' types first
(``matches``: dtype, byte order, dimensions, layout, writability, alignment; Python and
numpy scalars; tuples), as numba's dispatcher would type the same arguments.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import importlib.util
import json
import os
import platform
import sys
import sysconfig
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from gpumosaic import kernel_cache

# ---- the library: where it is, reading it, checking a call's types -------------------

AOT_ENV = "GPUMOSAIC_AOT"  # "0": never use the AOT library (numba's JIT for every call)


def host_key() -> str:
    """This CPU (architecture and feature flags): AOT code is built for the CPU it runs on."""
    digest = hashlib.sha256(platform.machine().encode())
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith(("flags", "Features", "model name")):
                digest.update(line.encode())
    return digest.hexdigest()[:16]


def aot_paths(directory: Path | None = None) -> tuple[Path, Path, str]:
    """(extension file, exports file, module name) of the AOT library in ``directory``
    (default: ``cache_dir()/aot``)."""
    directory = directory or kernel_cache.cache_dir() / "aot"
    name = f"gpumosaic_kernels_{kernel_cache.sources_digest()}"
    suffix = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
    return directory / f"{name}{suffix}", directory / f"{name}.json", name


Library = dict[str, tuple[tuple[Any, Callable[..., Any]], ...]]
_library: Library | None = None


def aot_library() -> Library:
    """Kernel key -> (guard, function) of each AOT export of the library in the cache; empty
    when there is none for these sources, this numba, this Python and this CPU (or
    ``GPUMOSAIC_AOT=0``). Loaded once."""
    global _library
    if _library is None:
        _library = {} if os.environ.get(AOT_ENV, "1") == "0" else load_library(None)
    return _library


def load_library(directory: Path | None) -> Library:
    """The AOT library in ``directory`` (see ``aot_library``; default: the cache's)."""
    extension, exports_file, name = aot_paths(directory)
    try:
        exports = json.loads(exports_file.read_text())
    except (OSError, ValueError):
        return {}
    if exports.get("host") != host_key() or not extension.exists():
        return {}
    spec = importlib.util.spec_from_file_location(name, extension)
    if spec is None or spec.loader is None:
        return {}
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    table: dict[str, list[tuple[Any, Callable[..., Any]]]] = {}
    for entry in exports["exports"]:
        guard = guard_of(["tuple", entry["args"]])
        table.setdefault(entry["kernel"], []).append((guard, getattr(module, entry["name"])))
    return {key: tuple(entries) for key, entries in table.items()}


def use_aot_library(library: Library | None) -> None:
    """Use ``library`` from now on (None: look the cache's up again on the next call)."""
    global _library
    _library = library
    for kernel in kernel_cache.kernels():
        kernel.forget_aot()


def guard_of(spec: Any) -> Any:
    """An argument spec of the exports file as tuples (arrays: their dtype as np.dtype)."""
    kind = spec[0]
    if kind == "array":
        return ("array", np.dtype(spec[1]), spec[2], spec[3], spec[4])
    if kind == "tuple":
        return ("tuple", tuple(guard_of(s) for s in spec[1]))
    return ("scalar", _SCALARS[spec[1]])


# Python and numpy scalar types numba types as each exported scalar type.
_SCALARS: dict[str, tuple[type, ...]] = {
    "int64": (int, np.int64),
    "bool": (bool, np.bool_),
    "float64": (float, np.float64),
}


def matches(guard: Any, args: Any) -> bool:
    """Whether ``args`` have exactly the numba types of ``guard`` (a "tuple" guard's)."""
    parts = guard[1]
    if type(args) is not tuple or len(args) != len(parts):
        return False
    for part, value in zip(parts, args, strict=True):
        kind = part[0]
        if kind == "array":
            if type(value) is not np.ndarray:
                return False
            _, dtype, ndim, layout, readonly = part
            flags = value.flags
            if (
                value.dtype != dtype
                or not value.dtype.isnative
                or value.ndim != ndim
                or flags.writeable == readonly
                or not flags.aligned
                or _layout(flags) != layout
            ):
                return False
        elif kind == "tuple":
            if not matches(part, value):
                return False
        elif type(value) not in part[1]:
            return False
    return True


def _layout(flags: Any) -> str:
    return "C" if flags.c_contiguous else "F" if flags.f_contiguous else "A"


# ---- building it -------------------------------------------------------------------------

# Tasks of openb's default trace each placement fills with to learn the signatures.
LEARNING_TASKS = 400
# A weighted combination (several members) next to every single placement.
COMBINATION = "pwr=200,fgd=800"


def learn_signatures() -> list[tuple[kernel_cache.Kernel, Any]]:
    """(kernel, numba signature) of every kernel a fill calls from Python, in a stable
    order."""
    from gpumosaic.placement.registry import placement_names
    from gpumosaic.sim.fill import run_fill
    from gpumosaic.traces.openb import load_openb_nodes, load_openb_tasks

    nodes = load_openb_nodes("openb:gpu")
    tasks = load_openb_tasks("openb:default")[:LEARNING_TASKS]
    for placement in (*placement_names(), COMBINATION):
        run_fill(nodes, tasks, placement, seed=0, inflate=1.3)
    found: list[tuple[kernel_cache.Kernel, Any]] = []
    for kernel in kernel_cache.kernels():
        if kernel.called_from_python:  # its callees are compiled into it
            found.extend((kernel, signature) for signature in kernel.compiled())
    return found


def argument_spec(numba_type: Any) -> list[Any]:
    """A numba argument type as the exports file writes it (``kernel_cache._guard``)."""
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


def build(directory: Path | None = None) -> tuple[Path, int, int]:
    """Learn the signatures, compile the library into ``directory`` (default: the keyed
    cache's ``aot``) and write its exports file; (extension path, exports, signatures left
    to numba's JIT: an argument type the exports file cannot spell)."""
    use_aot_library({})  # learn through the JIT, not an older library
    try:
        learned = learn_signatures()
    finally:
        use_aot_library(None)
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
    extension, exports_file, module_name = aot_paths(directory)
    extension.parent.mkdir(parents=True, exist_ok=True)
    _compile(module_name, extension, entries)
    exports_file.write_text(json.dumps({"host": host_key(), "exports": exports}))
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m gpumosaic.kernel_aot", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--out", type=Path, default=None, help="directory (default: cache)")
    parser.add_argument(
        "--strict", action="store_true", help="exit 1 when the library cannot be built"
    )
    args = parser.parse_args(argv)
    started = time.perf_counter()
    try:
        extension, count, left = build(args.out)
    except Exception as err:  # a missing compiler or pycc: say so, the JIT still works
        print(
            f"gpumosaic: the ahead-of-time kernel library was not built ({type(err).__name__}: "
            f"{err}); the kernels run through numba's JIT (~0.6 s more per command)",
            file=sys.stderr,
        )
        return 1 if args.strict else 0
    also = f"; {left} signature(s) with types it cannot take stay on numba's JIT" if left else ""
    print(f"built {extension} ({count} exports{also}) in {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    # As the package's module, not a second copy named __main__: the kernels look up the
    # library (``aot_library``'s state) in ``gpumosaic.kernel_aot``.
    from gpumosaic.kernel_aot import main as package_main

    sys.exit(package_main())
