"""One folder, one experiment: the ``--out`` folder of ``compare`` and ``run`` is locked
while the command writes it, and a folder that holds another experiment's runs is not
written over unless ``--overwrite`` says so.

The lock is ``fcntl.flock`` on ``OUT/.gpumosaic.lock``: the kernel drops it when the
holder ends, however it ends (Ctrl-C, a kill), so a stale lock cannot stay behind.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from gpumosaic.errors import InputError

LOCK_FILE = ".gpumosaic.lock"
EXPERIMENT_FILE = "experiment.toml"
# What a comparison or study leaves in its folder: removed by --overwrite.
STORED = (".kept-runs", "runs", "runs.parquet")  # .kept-runs: an older gpumosaic's cache


@contextlib.contextmanager
def locked_out(folder: Path, flag: str = "--out") -> Iterator[None]:
    """Hold the folder's lock for the block, or refuse at once (one line) when another
    command holds it."""
    folder.mkdir(parents=True, exist_ok=True)
    fd = os.open(folder / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip()
            by = f" (process {holder})" if holder.isdigit() else ""
            raise InputError(
                f"another gpumosaic command{by} is writing this folder: wait for it to end "
                "or choose another folder",
                field=flag,
                value=folder,
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield
    finally:
        os.close(fd)  # closing the file releases the lock


def _identity(text: str) -> Any:
    """What makes two experiment files the same experiment: the kind and the grid (not
    the comments, the description, the report or the references)."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return text
    return (data.get("experiment", {}).get("kind"), data.get("grid"))


def claim_for(folder: Path, experiment_text: str, overwrite: bool, flag: str = "--out") -> None:
    """Refuse a folder whose experiment file describes another experiment (unless
    ``overwrite``: then the other experiment's stored runs are removed first). Call it
    with the folder locked."""
    existing = folder / EXPERIMENT_FILE
    if not existing.is_file():
        return
    if _identity(existing.read_text()) == _identity(experiment_text):
        return
    if not overwrite:
        raise InputError(
            f"holds another experiment's runs ({EXPERIMENT_FILE} differs): choose another "
            "folder, or add --overwrite to replace them",
            field=flag,
            value=folder,
        )
    for name in STORED:
        path = folder / name
        if path.is_dir():
            shutil.rmtree(path)
        elif path.exists():
            path.unlink()
