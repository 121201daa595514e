"""The ahead-of-time (AOT) kernel library: the kernels a fill and Gavel's round mechanism
run, as one extension module that loads without numba (``kernel_cache`` says why and how
a kernel uses it). Here: where it lives, reading it and checking a call's argument types
against an export's.
``gpumosaic kernels`` builds it (``cli/kernels.py``; ``make`` runs it after installing).

The library lives in a user cache shared by every clone (``aot_dir``), in a directory
named by the hash of the kernel sources and numba (``kernel_sources.sources_digest``) and by
the CPU: one extension module per group of kernels (``GROUPS``), each with a JSON list of
its exports (kernel, exported name, argument types). A change to any kernel source moves
the directory, and the kernels run through numba's JIT until the library is built again
(``gpumosaic kernels``; ``kernel_build`` builds it); so does another CPU.

An AOT function trusts its arguments to have the types it was compiled for (a wrong dtype
reads memory as another type), so a call is checked against the exports' types first
(``guard_of``: dtype, byte order, dimensions, layout, writability, alignment; Python and
numpy scalars; tuples), as numba's dispatcher would type the same arguments.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib.util
import json
import os
import platform
import sysconfig
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from gpumosaic import kernel_sources

AOT_ENV = "GPUMOSAIC_AOT"  # "0": never use the AOT library (numba's JIT for every call)


@functools.cache
def host_key() -> str:
    """This CPU (architecture and feature flags): AOT code is built for the CPU it runs on."""
    digest = hashlib.sha256(platform.machine().encode())
    seen: set[str] = set()
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as cpuinfo:
        for line in cpuinfo:  # the first processor's lines are enough
            key = line.split(":", 1)[0].strip()
            if key in ("flags", "Features", "model name"):
                if key in seen:
                    break
                seen.add(key)
                digest.update(line.encode())
    return digest.hexdigest()[:16]


# The groups of kernels the library is built in, each its own extension module: what one
# kind of command runs (a group is built only where it is needed: ``make demo`` builds
# "placement"). A kernel belongs to the first group with a prefix of its key.
GROUPS: dict[str, tuple[str, ...]] = {
    "placement": ("gpumosaic.placement.", "gpumosaic.results.timeline."),
    "rounds": ("gpumosaic.",),  # the round mechanism's and the policies' (max-min classes)
}


def group_of(kernel_key: str) -> str:
    """The group a kernel's AOT export is built in."""
    return next(g for g, prefixes in GROUPS.items() if kernel_key.startswith(prefixes))


def aot_dir() -> Path:
    """Where the AOT library lives: a user cache shared by every clone and checkout path
    of the same kernel sources, numba and CPU (``$XDG_CACHE_HOME/gpumosaic``, default
    ``~/.cache/gpumosaic``; under ``$NUMBA_CACHE_DIR`` when that is set), named by their
    hash; the in-package cache where no home directory is writable."""
    name = f"aot-{kernel_sources.sources_digest()}-{host_key()}"
    user = os.environ.get("NUMBA_CACHE_DIR")
    if user:
        return Path(user) / f"gpumosaic-{name}"
    home = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    shared = Path(home) / "gpumosaic"
    with contextlib.suppress(OSError):
        shared.mkdir(parents=True, exist_ok=True)
    if os.access(shared, os.W_OK):
        return shared / name
    return kernel_sources.cache_dir() / "aot"


def aot_paths(directory: Path | None = None, group: str = "placement") -> tuple[Path, Path, str]:
    """(extension file, exports file, module name) of one group of the AOT library in
    ``directory`` (default: ``aot_dir()``)."""
    directory = directory or aot_dir()
    name = f"gpumosaic_kernels_{kernel_sources.sources_digest()}_{group}"
    suffix = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
    return directory / f"{name}{suffix}", directory / f"{name}.json", name


def missing_groups(groups: list[str] | None = None, directory: Path | None = None) -> list[str]:
    """Those of ``groups`` (default: all) whose module is not built in ``directory``."""
    missing = []
    for group in groups or list(GROUPS):
        extension, exports_file, _ = aot_paths(directory, group)
        if not (extension.exists() and exports_file.exists()):
            missing.append(group)
    return missing


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
    """The AOT library's groups built in ``directory`` (see ``aot_library``; default:
    ``aot_dir()``); a group not built there is left to numba's JIT."""
    table: dict[str, list[tuple[Guard, Callable[..., Any]]]] = {}
    for group in GROUPS:
        for key, entries in _load_group(directory, group).items():
            table.setdefault(key, []).extend(entries)
    return {key: tuple(entries) for key, entries in table.items()}


def _load_group(directory: Path | None, group: str) -> dict[str, list[tuple[Guard, Any]]]:
    extension, exports_file, name = aot_paths(directory, group)
    try:
        exports = json.loads(exports_file.read_text())
    except (OSError, ValueError):
        return {}
    if exports.get("host") != host_key() or not extension.exists():
        return {}
    spec = importlib.util.spec_from_file_location(name, extension)
    if spec is None or spec.loader is None:
        return {}
    try:
        module = importlib.util.module_from_spec(spec)  # loads the shared object
        spec.loader.exec_module(module)
    except ImportError as err:  # e.g. built against another numpy: rebuild it
        warnings.warn(
            f"the ahead-of-time kernel library {extension} does not load ({err}); the "
            "kernels run through numba's JIT until `gpumosaic kernels` builds it again",
            RuntimeWarning,
            stacklevel=3,
        )
        return {}
    table: dict[str, list[tuple[Guard, Callable[..., Any]]]] = {}
    for entry in exports["exports"]:
        guard = guard_of(["tuple", entry["args"]])
        table.setdefault(entry["kernel"], []).append((guard, getattr(module, entry["name"])))
    return table


def set_library(library: Library | None) -> None:
    """Use ``library`` from now on (None: load the cache's again on the next call); the
    kernels forget what they looked up (``kernel_cache.use_aot_library`` does both)."""
    global _library
    _library = library


Guard = Callable[[Any], bool]

# numpy's array flag bits (``ndarray.flags.num``).
_C_CONTIGUOUS, _F_CONTIGUOUS, _ALIGNED, _WRITEABLE = 0x1, 0x2, 0x100, 0x400
# (mask, value) of the contiguity bits per numba layout: "C" is C-contiguous (a 1-d array
# is both), "F" only F-contiguous, "A" neither.
_LAYOUT_BITS = {
    "C": (_C_CONTIGUOUS, _C_CONTIGUOUS),
    "F": (_C_CONTIGUOUS | _F_CONTIGUOUS, _F_CONTIGUOUS),
    "A": (_C_CONTIGUOUS | _F_CONTIGUOUS, 0),
}
# Python and numpy scalar types numba types as each exported scalar type.
_SCALARS: dict[str, tuple[type, ...]] = {
    "int64": (int, np.int64),
    "bool": (bool, np.bool_),
    "float64": (float, np.float64),
}


def guard_of(spec: Any) -> Guard:
    """A function telling whether a value has exactly the numba type of an argument spec of
    the exports file (a "tuple" spec: a call's arguments). It is generated as one Python
    expression, the checks unrolled (as dataclasses generate their methods): a call checks
    its arguments on every call where they may change, ~0.1 us an array instead of ~0.3 us
    for a loop over the spec."""
    names: dict[str, Any] = {"ndarray": np.ndarray, "tuple": tuple, "len": len, "type": type}
    source = f"def check(args):\n    return {_expression(spec, 'args', names)}\n"
    exec(compile(source, "<gpumosaic AOT argument guard>", "exec"), names)
    check: Guard = names["check"]
    return check


def _expression(spec: Any, value: str, names: dict[str, Any]) -> str:
    kind = spec[0]
    if kind == "tuple":
        parts = [f"type({value}) is tuple", f"len({value}) == {len(spec[1])}"]
        parts += [_expression(s, f"{value}[{i}]", names) for i, s in enumerate(spec[1])]
        return "(" + " and ".join(parts) + ")"
    if kind == "array":
        _, dtype, ndim, layout, readonly = spec
        d = f"dtype{len(names)}"
        names[d] = np.dtype(dtype)  # native byte order: another order is another dtype
        mask, want = _LAYOUT_BITS[layout]
        mask |= _ALIGNED | _WRITEABLE
        want |= _ALIGNED | (0 if readonly else _WRITEABLE)
        return (
            f"(type({value}) is ndarray and ({value}.dtype is {d} or {value}.dtype == {d})"
            f" and {value}.ndim == {int(ndim)} and ({value}.flags.num & {mask}) == {want})"
        )
    checks = []
    for scalar in _SCALARS[spec[1]]:
        name = f"scalar{len(names)}"
        names[name] = scalar
        checks.append(f"type({value}) is {name}")
    return "(" + " or ".join(checks) + ")"
