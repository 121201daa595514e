"""What names a compiled kernel's machine code: the hash of every kernel source and numba's
version (``sources_digest``) and the directory numba's cache lives in (``cache_dir``).
The lowest floor of the kernel plumbing: ``kernel_cache`` (the kernels) and
``kernel_aot`` (the ahead-of-time library) both read it, and neither the other."""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib.util
import os
from pathlib import Path

PACKAGE_ROOT = Path(__file__).resolve().parent

# Every module that defines numba kernels, relative to the package.
KERNEL_SOURCES: tuple[str, ...] = (
    "mechanisms/rounds/choice_kernel.py",
    "mechanisms/rounds/kernel.py",
    "mechanisms/rounds/round_kernel.py",
    "model/bulk_kernel.py",
    "placement/kernel/arithmetic.py",
    "placement/kernel/fgd.py",
    "placement/kernel/random.py",
    "placement/kernel/scores.py",
    "placement/kernel/step.py",
    "placement/kernel/tournament.py",
    "policies/row_classes.py",
    "mechanisms/rounds/sim/tracker_kernel.py",
    "results/timeline/kernel.py",
)


def _numba_version_file() -> bytes:
    spec = importlib.util.find_spec("numba")
    if spec is None or spec.origin is None:
        raise ImportError("numba is not installed (gpumosaic's kernels need it)")
    return (Path(spec.origin).parent / "_version.py").read_bytes()


@functools.cache
def sources_digest() -> str:
    # numba's version file, read rather than imported (numba's import is what we avoid).
    digest = hashlib.sha256(_numba_version_file())
    for name in KERNEL_SOURCES:
        digest.update(name.encode())
        digest.update((PACKAGE_ROOT / name).read_bytes())
    return digest.hexdigest()[:16]


@functools.cache
def cache_dir() -> Path:
    """Where the kernels' machine code is cached (see the module's docstring)."""
    name = f"kernels-{sources_digest()}"
    user = os.environ.get("NUMBA_CACHE_DIR")
    if user:
        return Path(user) / f"gpumosaic-{name}"
    in_package = PACKAGE_ROOT / "__pycache__" / "numba"
    with contextlib.suppress(OSError):
        in_package.mkdir(parents=True, exist_ok=True)
    if os.access(in_package, os.W_OK):
        return in_package / name
    home = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(home) / "gpumosaic" / name
