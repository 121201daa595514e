"""Build and find the C libraries: the interposer and the stand-in libcuda for tests.

The package's own install compiles the interposer (``setup.py``) into ``_native/`` next to
this module, with a digest of its sources. When that copy is missing or stale (a source
checkout run with ``PYTHONPATH=src``, or sources edited after install), the library is
built on demand with the machine's C compiler into a per-user cache keyed by the same
digest, so a stale binary is never loaded.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from gpumosaic.errors import InputError

CSRC = Path(__file__).with_name("csrc")
PACKAGED = Path(__file__).with_name("_native")


class ShareError(InputError):
    """A share command cannot proceed: no compiler, no daemon, a socket not writable."""


@dataclass(frozen=True, slots=True)
class NativeLibrary:
    """One C library: its sources, the file name it must have, and the link flags."""

    source: str
    file_name: str
    libs: tuple[str, ...]


INTERPOSER = NativeLibrary("interposer.c", "libgpumosaic_share.so", ("-ldl", "-lpthread"))
# The stand-in driver must be found as libcuda.so.1, like the real one.
# -Bsymbolic: its cuGetProcAddress hands out its own functions, as the real driver does,
# not the interposer's same-named ones.
FAKE_CUDA = NativeLibrary("fakecuda.c", "libcuda.so.1", ("-lpthread", "-Wl,-Bsymbolic"))
LIBRARIES = {"interposer": INTERPOSER, "fakecuda": FAKE_CUDA}
CFLAGS = ("-O2", "-fPIC", "-shared", "-fvisibility=hidden", "-Wall", "-Wno-unused-parameter")


def source_digest(lib: NativeLibrary) -> str:
    digest = hashlib.sha256()
    for name in (lib.source, "cuda_api.h"):
        digest.update((CSRC / name).read_bytes())
    digest.update(" ".join(CFLAGS + lib.libs).encode())
    return digest.hexdigest()[:16]


def find_compiler() -> str:
    """The C compiler: $CC, else cc, gcc or clang on the PATH."""
    env = os.environ.get("CC")
    candidates = [env] if env else ["cc", "gcc", "clang"]
    for cc in candidates:
        found = shutil.which(cc)
        if found:
            return found
    tried = f"$CC={env}" if env else "cc, gcc, clang"
    raise ShareError(
        f"cannot build the share interposer: no C compiler ({tried} not found); "
        "install gcc or set CC"
    )


def build_library(lib: NativeLibrary, out_dir: Path) -> Path:
    """Compile ``lib`` into ``out_dir`` (atomically) and record its source digest."""
    cc = find_compiler()
    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / lib.file_name
    with tempfile.TemporaryDirectory(dir=out_dir) as tmp:
        tmp_out = Path(tmp) / lib.file_name
        cmd = [cc, *CFLAGS, "-o", str(tmp_out), str(CSRC / lib.source), *lib.libs]
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            first = (proc.stderr.strip().splitlines() or ["no output"])[0]
            raise ShareError(f"cannot build the share interposer with {cc}: {first}")
        os.replace(tmp_out, target)
    target.with_name(target.name + ".sha256").write_text(source_digest(lib) + "\n")
    return target


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "gpumosaic" / "share"


def _fresh(path: Path, lib: NativeLibrary) -> bool:
    stamp = path.with_name(path.name + ".sha256")
    return path.is_file() and stamp.is_file() and stamp.read_text().strip() == source_digest(lib)


def check_loadable(path: Path) -> None:
    """Raise a one-line ShareError unless ``path`` loads (ld.so would only warn and run the
    program unshared)."""
    try:
        ctypes.CDLL(str(path), mode=os.RTLD_LOCAL)
    except OSError as err:
        raise ShareError(f"cannot load the share interposer {path}: {err}") from None


def library_path(name: str = "interposer") -> Path:
    """Path of a built, up-to-date library; builds it into the cache when needed."""
    lib = LIBRARIES[name]
    packaged = PACKAGED / lib.file_name
    if _fresh(packaged, lib):
        return packaged
    cached = cache_dir() / f"{name}-{source_digest(lib)}" / lib.file_name
    if _fresh(cached, lib):
        return cached
    try:
        return build_library(lib, cached.parent)
    except OSError as err:
        raise ShareError(f"cannot build the share interposer into {cached.parent}: {err}") from None
