"""What the lease book knows of each job row, as columns, and the specs it places.

A round re-places thousands of entities; reading ``JobSpec`` attributes one by one for
each of them every round is most of a round's Python. A row's shape is read once, when the
lease book first sees the row, into arrays; the spec placed for (row, GPU type) -- the
job's spec with its holder id and that type as its only allowed model -- is built once
and kept in an object array until the job is forgotten.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from gpumosaic.model.gpu import MILLI_PER_GPU
from gpumosaic.model.job import JobSpec
from gpumosaic.types import BoolArray, IntArray

EntityKey = tuple[int, int]  # (row of job a, row of job b or -1)


def holder_id(key: EntityKey) -> int:
    """A single job holds its GPUs under its row; a pair under a negative id."""
    a, b = key
    return a if b < 0 else -(1 + a * (1 << 31) + b)


def pair_spec(spec: JobSpec) -> JobSpec:
    """What a packed pair asks for: it shares its members' GPUs, so whole GPUs, the first
    member's count, no CPU or memory of its own."""
    return replace(spec, gpu_milli=MILLI_PER_GPU, cpu_milli=0, memory_mib=0)


class RowShapes:
    """Per job row: GPUs, milli per GPU, CPU and memory asked for, may it span servers, and
    a small int per distinct placement shape (equal ids: the placement filter sees the
    same job); per (row, type): the typed spec placed for a single job."""

    def __init__(self, type_names: tuple[str, ...]) -> None:
        self.allowed = tuple(frozenset({name.upper()}) for name in type_names)
        self.n_types = len(type_names)
        self.known = 0
        self.num_gpu = np.zeros(0, dtype=np.int64)
        self.gpu_milli = np.zeros(0, dtype=np.int64)
        self.cpu_milli = np.zeros(0, dtype=np.int64)
        self.memory_mib = np.zeros(0, dtype=np.int64)
        self.may_span = np.zeros(0, dtype=bool)
        self.shape = np.zeros(0, dtype=np.int64)
        self._typed = np.empty((0, self.n_types), dtype=object)
        self._built = np.zeros((0, self.n_types), dtype=bool)
        self._any_built = False  # some typed spec was built (else ``forget`` has nothing to do)
        self._shape_ids: dict[tuple[int, int, int, int], int] = {}

    def learn(self, specs: Sequence[JobSpec], n_rows: int) -> None:
        """Read the rows not seen yet (``specs[row]`` for row < ``n_rows``)."""
        if n_rows <= self.known:
            return
        if n_rows > len(self.num_gpu):
            self._grow(max(n_rows, 2 * len(self.num_gpu)))
        for row in range(self.known, n_rows):
            spec = specs[row]
            self.num_gpu[row] = spec.num_gpu
            self.gpu_milli[row] = spec.gpu_milli
            self.cpu_milli[row] = spec.cpu_milli
            self.memory_mib[row] = spec.memory_mib
            self.may_span[row] = spec.may_span_nodes
            self.shape[row] = self.shape_id(
                spec.num_gpu, spec.gpu_milli, spec.cpu_milli, spec.memory_mib
            )
        self.known = n_rows

    def shape_id(self, num_gpu: int, gpu_milli: int, cpu_milli: int, memory_mib: int) -> int:
        """One int per ``placement.filter.filter_key`` without the allowed models (the
        lease book adds the type)."""
        if num_gpu == 0:
            gpu_milli = 0
        key = (num_gpu, gpu_milli, cpu_milli, memory_mib)
        found = self._shape_ids.get(key)
        if found is None:
            found = self._shape_ids[key] = len(self._shape_ids)
        return found

    def total_milli(self, rows: IntArray, pair: BoolArray) -> IntArray:
        """GPU milli each entity asks for in all (a pair: whole GPUs, its first member's
        count)."""
        milli = np.where(pair, MILLI_PER_GPU, self.gpu_milli[rows])
        return np.asarray(self.num_gpu[rows] * milli, dtype=np.int64)

    def typed(self, specs: Sequence[JobSpec], rows: IntArray, t: int) -> list[JobSpec]:
        """The specs placed for single jobs ``rows`` on type ``t`` (built on first use)."""
        missing = rows[~self._built[rows, t]]
        if len(missing):
            self._any_built = True
            allowed = self.allowed[t]
            for row in missing.tolist():
                self._typed[row, t] = specs[row].placed_as(row, allowed)
            self._built[missing, t] = True
        return list(self._typed[rows, t])

    def forget(self, rows: Sequence[int]) -> None:
        """Drop the typed specs of finished jobs."""
        if self._any_built and len(rows):
            index = np.asarray(rows, dtype=np.int64)
            self._typed[index] = None
            self._built[index] = False

    def _grow(self, size: int) -> None:
        for name in ("num_gpu", "gpu_milli", "cpu_milli", "memory_mib", "may_span", "shape"):
            old = getattr(self, name)
            new = np.zeros(size, dtype=old.dtype)
            new[: len(old)] = old
            setattr(self, name, new)
        typed = np.empty((size, self.n_types), dtype=object)
        typed[: len(self._typed)] = self._typed
        built = np.zeros((size, self.n_types), dtype=bool)
        built[: len(self._built)] = self._built
        self._typed, self._built = typed, built
