"""The kernels' numba cache is keyed by every kernel source (``gpumosaic.kernel_cache``)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from gpumosaic import kernel_cache

SRC = Path(kernel_cache.__file__).resolve().parent


def test_every_module_that_compiles_with_numba_is_a_listed_kernel_source() -> None:
    compiling = {
        path.relative_to(SRC).as_posix()
        for path in SRC.rglob("*.py")
        if re.search(r"^\s*@(numba\.)?n?jit\b", path.read_text(), re.MULTILINE)
    }
    assert compiling == set(kernel_cache.KERNEL_SOURCES)
    for path in SRC.rglob("*.py"):
        if path.name == "kernel_cache.py":
            continue
        text = path.read_text()
        assert not re.search(r"from numba import .*\bn?jit\b", text), path  # take njit from here
        assert "numba.njit" not in text, path


def test_cache_directory_follows_the_sources_and_numba_cache_dir(tmp_path: Path) -> None:
    code = "from gpumosaic import kernel_cache as k; print(k.cache_dir())"
    env = {"NUMBA_CACHE_DIR": str(tmp_path), "PATH": "/usr/bin:/bin"}
    env["PYTHONPATH"] = str(SRC.parent)
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    ).stdout.strip()
    assert out == str(tmp_path / f"gpumosaic-kernels-{kernel_cache.sources_digest()}")


def test_a_kernel_is_cached_in_the_keyed_directory() -> None:
    from gpumosaic.placement.kernel import arithmetic

    locator = arithmetic.pairwise_sum._cache._impl.locator
    assert Path(locator.get_cache_path()).is_relative_to(kernel_cache.cache_dir())
