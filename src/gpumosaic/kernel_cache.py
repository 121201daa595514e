"""numba's on-disk cache for gpumosaic's compiled kernels, keyed by every kernel source.

numba keys a cached function by its own file (its modification time and size) only: a
kernel that calls a kernel of another file would keep its old machine code after that
other file changed, and decide with the old arithmetic. Every kernel module takes
``njit`` from here instead of from numba: its cache lives in a directory named by a hash
of all the kernel sources (``KERNEL_SOURCES``) and numba's version, so a change to any
kernel compiles them all afresh. A test checks that every module that compiles with
numba is listed.

Where: ``$NUMBA_CACHE_DIR/gpumosaic-kernels-HASH`` when that variable is set, else
``__pycache__/numba/kernels-HASH`` in the installed package, or, where the package is
read-only, ``$XDG_CACHE_HOME/gpumosaic`` (``~/.cache/gpumosaic``). A directory of an
older hash is not used again; it may be deleted.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

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
    "sim/rounds/tracker_kernel.py",
    "sim/timeline/kernel.py",
)

F = TypeVar("F", bound=Callable[..., Any])


@functools.cache
def sources_digest() -> str:
    import numba

    digest = hashlib.sha256(numba.__version__.encode())
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


def njit(**options: Any) -> Callable[[F], F]:
    """``numba.njit(cache=True, **options)`` with the cache in ``cache_dir()``."""
    import numba
    from numba.core import config as numba_config

    config: Any = numba_config  # its settings are set at import, untyped
    options.setdefault("cache", True)

    def compile_later(func: F) -> F:
        # numba picks a function's cache directory when it is decorated, from
        # config.CACHE_DIR; set it for this decoration only (no other numba user sees it).
        saved = config.CACHE_DIR
        config.CACHE_DIR = str(cache_dir())
        try:
            return numba.njit(**options)(func)
        finally:
            config.CACHE_DIR = saved

    return compile_later
