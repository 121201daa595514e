"""Runs kept as they end, so that an interrupted comparison or reproduction resumes.

``KeptRuns(folder)`` stores each finished run's result in ``folder/.kept-runs/`` under a
key made of the function and the item it ran (their ``repr``: every item is a frozen
dataclass or plain values), written atomically. A rerun of the same command finds them,
runs only what is missing and says how many it reused. Studies (``gpumosaic run``) keep
their runs in their result store instead (experiments/results/store.py).
"""

from __future__ import annotations

import hashlib
import os
import pickle
from collections.abc import Callable
from pathlib import Path
from typing import Any

KEPT_DIR = ".kept-runs"


class KeptRuns:
    """One command's kept runs: the process that runs the command is its only writer."""

    def __init__(
        self,
        folder: Path,
        inputs: tuple[str | None, ...] = (),
        announce: Callable[[str], None] | None = None,
    ) -> None:
        """``inputs``: the command's input spellings (cluster, workload, ...); those that
        name files add the files' size and time of change to every key, so that a run
        kept from an older version of the file is not reused. ``announce`` is given the
        line saying how many stored runs a rerun reuses, before it runs the rest."""
        self.folder = folder / KEPT_DIR
        self.announce = announce
        self._inputs = _fingerprint(inputs)
        self.reused = 0  # results found kept (not run again) by ``get``
        self.kept = 0  # results kept by this command (``put``)

    def _path(self, fn: Callable[..., Any], item: Any) -> Path:
        key = f"{fn.__module__}.{fn.__qualname__}\n{item!r}\n{self._inputs}"
        return self.folder / f"{hashlib.sha256(key.encode()).hexdigest()[:32]}.pickle"

    def get(self, fn: Callable[..., Any], item: Any) -> tuple[bool, Any]:
        """``(True, result)`` when ``fn(item)`` ran to its end before; ``(False, None)``
        otherwise (also for a kept file that no longer loads: it runs again)."""
        path = self._path(fn, item)
        if not path.is_file():
            return False, None
        try:
            with path.open("rb") as handle:
                result = pickle.load(handle)
        except Exception:  # written by another version of the code: run it again
            return False, None
        self.reused += 1
        return True, result

    def has(self, fn: Callable[..., Any], item: Any) -> bool:
        """Whether ``fn(item)``'s result is stored (read from the folder, as it is now)."""
        return self._path(fn, item).is_file()

    def put(self, fn: Callable[..., Any], item: Any, result: Any) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        path = self._path(fn, item)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        with tmp.open("wb") as handle:
            pickle.dump(result, handle, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, path)
        self.kept += 1

    def stored(self) -> int:
        """The runs stored in the folder now (this command's and earlier ones')."""
        return sum(1 for _ in self.folder.glob("*.pickle")) if self.folder.is_dir() else 0

    def reused_note(self, total: int) -> str | None:
        """The line a rerun prints before it runs: how many of its runs it found stored."""
        if not self.reused:
            return None
        return (
            f"reusing {self.reused} of {total} runs stored in {self.folder.parent} by an "
            f"earlier call; running the other {total - self.reused}"
        )


def _fingerprint(inputs: tuple[str | None, ...]) -> str:
    parts = []
    for spelling in inputs:
        if not spelling:
            continue
        for candidate in (spelling, spelling.partition(":")[2].partition(",")[0]):
            try:
                stat = Path(candidate).stat()
            except (OSError, ValueError):
                continue
            if Path(candidate).is_file():
                parts.append(f"{candidate}:{stat.st_size}:{stat.st_mtime_ns}")
    return ";".join(parts)
