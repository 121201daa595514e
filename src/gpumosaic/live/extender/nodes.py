"""NodeTable: the extender's nodes by name, their ClusterState, and why a node fails.

Filter answers must name a reason per failed node. The reasons are computed in one
vectorized pass, in the order of placement.filter (GPU model, CPU, memory, GPU), and a
node that could never hold the pod (wrong model, too small even when empty) goes to
``FailedAndUnresolvableNodes``, where kube-scheduler does not try preemption.
"""

from __future__ import annotations

from itertools import repeat

import numpy as np
import numpy.typing as npt

from gpumosaic.live.extender.vocabulary import NodeReading
from gpumosaic.model.cluster import ClusterSpec
from gpumosaic.model.job import JobSpec
from gpumosaic.model.state import ClusterState
from gpumosaic.placement.filter import Reason, feasible_nodes

UNKNOWN, MODEL, NEVER, CPU, MEMORY, GPU = range(6)
UNRESOLVABLE = (UNKNOWN, MODEL, NEVER)


class NodeTable:
    def __init__(self, readings: tuple[NodeReading, ...]) -> None:
        unique: dict[str, NodeReading] = {}
        for r in readings:
            unique.setdefault(r.spec.name, r)  # a name listed twice keeps its first entry
        self.readings = tuple(unique.values())
        self.spec = ClusterSpec(tuple(r.spec for r in self.readings))
        self.names = [r.spec.name for r in self.readings]
        self.index = {name: i for i, name in enumerate(self.names)}
        self.state = ClusterState(self.spec)
        self.unknown_models = tuple(
            sorted({r.spec.gpu.name for r in self.readings if r.unknown_model})
        )

    def indices(self, names: list[str]) -> npt.NDArray[np.intp]:
        """Node index of each name, -1 for names not in the table."""
        return np.fromiter(map(self.index.get, names, repeat(-1)), dtype=np.intp, count=len(names))

    def feasible_among(self, job: JobSpec, names: list[str]) -> npt.NDArray[np.intp]:
        """Indices (ascending, unique) of the named nodes that can hold ``job`` now."""
        idx = self.indices(names)
        idx = idx[idx >= 0]
        return np.unique(idx[feasible_nodes(self.state, job)[idx]])

    def split(
        self, job: JobSpec, names: list[str]
    ) -> tuple[list[str], dict[str, str], dict[str, str]]:
        """(passing names in input order, failed {name: reason}, unresolvable {...})."""
        idx = self.indices(names)
        known = idx >= 0
        ok = np.zeros(len(names), dtype=bool)
        ok[known] = feasible_nodes(self.state, job)[idx[known]]
        passed = [names[i] for i in np.flatnonzero(ok)]
        bad = np.flatnonzero(~ok)
        if not len(bad):
            return passed, {}, {}
        codes = self._codes(job, idx[bad])
        messages = self._messages(job)
        failed: dict[str, str] = {}
        unresolvable: dict[str, str] = {}
        for i, code in zip(bad.tolist(), codes.tolist(), strict=True):
            (unresolvable if code in UNRESOLVABLE else failed)[names[i]] = messages[code]
        return passed, failed, unresolvable

    def reason(self, job: JobSpec, node: int) -> str:
        code = int(self._codes(job, np.array([node], dtype=np.intp))[0])
        return self._messages(job)[code]

    def _codes(self, job: JobSpec, idx: npt.NDArray[np.intp]) -> npt.NDArray[np.int8]:
        """Reason code per node index (-1 = unknown name); the first failing check wins."""
        s = self.state
        codes = np.full(len(idx), GPU, dtype=np.int8)
        k = np.where(idx >= 0, idx, 0)
        checks = [
            (MEMORY, s.memory_free[k] < job.memory_mib),
            (CPU, s.cpu_free[k] < job.cpu_milli),
            (
                NEVER,
                (s.cpu_capacity[k] < job.cpu_milli)
                | (s.memory_capacity[k] < job.memory_mib)
                | (s.num_gpus[k] < job.num_gpu),
            ),
        ]
        if job.num_gpu:
            checks.append((MODEL, ~s.model_mask(job.allowed_models)[k]))
        checks.append((UNKNOWN, idx < 0))
        for code, hit in checks:  # later checks overwrite: the last listed has priority
            codes[hit] = code
        return codes

    @staticmethod
    def _messages(job: JobSpec) -> dict[int, str]:
        models = "|".join(sorted(job.allowed_models or ()))
        return {
            UNKNOWN: "unknown node: not in the extender's cluster",
            MODEL: f"{Reason.GPU_MODEL.value}: the node's GPU model is not in {{{models}}}",
            NEVER: f"{Reason.NEVER_FITS.value}: the node is too small even when empty",
            CPU: f"{Reason.CPU.value}: less than {job.cpu_milli} milli-CPU free",
            MEMORY: f"{Reason.MEMORY.value}: less than {job.memory_mib} MiB memory free",
            GPU: f"{Reason.GPU.value}: fewer than {job.num_gpu} GPU(s) with "
            f"{job.gpu_milli} milli free",
        }
