"""The ahead-of-time (AOT) kernel library: the kernels a fill runs, as one extension module
that loads without numba (``kernel_cache`` says why and how a kernel uses it). Here: where
it lives, reading it and checking a call's argument types against an export's.
``gpumosaic kernels`` builds it (``cli/kernels.py``; ``make`` runs it after installing).

The library lives in the kernels' keyed cache directory (``kernel_cache.cache_dir()/aot``)
with a JSON list of its exports (kernel, exported name, argument types) and the CPU it was
built for: a change to any kernel source moves the directory, and the kernels run through
numba's JIT until the library is built again; so does another CPU.

An AOT function trusts its arguments to have the types it was compiled for (a wrong dtype
reads memory as another type), so a call is checked against the exports' types first
(``matches``: dtype, byte order, dimensions, layout, writability, alignment; Python and
numpy scalars; tuples), as numba's dispatcher would type the same arguments.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import os
import platform
import sysconfig
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from gpumosaic import kernel_cache

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
