"""NodeTable: the extender's nodes by name, their ClusterState, and why a node fails.

Filter answers must name a reason per failed node. The reason is the filter's own
(``placement.filter.node_reasons``: what ``explain`` says of that node alone), computed
for all nodes in one vectorized pass; only names the extender does not know get a reason
of their own. A node that could never hold the pod (``never_fits``) or is unknown goes to
``FailedAndUnresolvableNodes``, where kube-scheduler does not try preemption.
"""

from __future__ import annotations

from itertools import repeat

import numpy as np
import numpy.typing as npt
import orjson

from gpumosaic.apps.extender.vocabulary import NodeReading
from gpumosaic.apps.extender.wire import MAX_EXTENDER_PRIORITY, host_priority_list
from gpumosaic.model.cluster import ClusterSpec
from gpumosaic.model.job import JobSpec
from gpumosaic.model.state import ClusterState
from gpumosaic.placement.filter import NODE_REASONS, Reason, feasible_nodes, node_reasons

NEVER = NODE_REASONS.index(Reason.NEVER_FITS)
UNKNOWN = len(NODE_REASONS)  # a name not in the extender's cluster: no filter reason
WRONG_MODEL = UNKNOWN + 1  # NEVER_FITS because of the GPU model (a detail, same code)
UNRESOLVABLE = (NEVER, UNKNOWN, WRONG_MODEL)
RECENT_LISTS = 8  # name lists whose indices are kept
# The tail of a HostPriority entry for each score 0..10.
_SCORE_TAILS = tuple(b"%d}" % s for s in range(MAX_EXTENDER_PRIORITY + 1))


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
        # '{"Host":"<name>","Score":' per node, encoded once: a prioritize answer for
        # 1,213 nodes is then a join of byte strings (~0.1 ms), not 1,213 dicts to encode.
        self._recent: list[tuple[list[str], npt.NDArray[np.intp]]] = []
        self._entry_heads = [b'{"Host":%b,"Score":' % orjson.dumps(n) for n in self.names]

    def encode_priorities(
        self, names: list[str], idx: npt.NDArray[np.intp], scores: npt.NDArray[np.int64]
    ) -> bytes:
        """The JSON of the HostPriorityList for ``names`` (``idx``: their indices; scores
        0..10, aligned)."""
        if len(idx) and (idx.min() < 0 or scores.min() < 0 or scores.max() > 10):
            return orjson.dumps(host_priority_list(names, scores.tolist()))  # unknown names
        heads = map(self._entry_heads.__getitem__, idx.tolist())
        tails = map(_SCORE_TAILS.__getitem__, scores.tolist())
        return b"[" + b",".join(map(bytes.__add__, heads, tails)) + b"]"

    def indices(self, names: list[str]) -> npt.NDArray[np.intp]:
        """Node index of each name, -1 for names not in the table. kube-scheduler sends
        the same list of names again and again (all nodes to filter; often all of them
        again to prioritize): a list equal to a recent one is recognized by comparing the
        strings (no hashing of 1,213 fresh strings), and its indices are reused."""
        for known, idx in self._recent:
            if len(known) == len(names) and known == names:
                return idx
        idx = np.fromiter(map(self.index.get, names, repeat(-1)), dtype=np.intp, count=len(names))
        idx.setflags(write=False)
        self._recent.insert(0, (names, idx))
        del self._recent[RECENT_LISTS:]
        return idx

    def feasible_at(self, job: JobSpec, idx: npt.NDArray[np.intp]) -> npt.NDArray[np.intp]:
        """Node indices (ascending, unique) among ``idx`` (-1s ignored) that can hold
        ``job`` now."""
        named = np.zeros(self.state.num_nodes + 1, dtype=bool)
        named[idx] = True  # -1 marks the extra last slot
        named = named[:-1] & feasible_nodes(self.state, job)
        return np.flatnonzero(named)

    def split(
        self, job: JobSpec, names: list[str]
    ) -> tuple[list[str], dict[str, str], dict[str, str]]:
        """(passing names in input order, failed {name: reason}, unresolvable {...})."""
        idx = self.indices(names)
        ok = np.zeros(self.state.num_nodes + 1, dtype=bool)  # [-1]: unknown names fail
        ok[:-1] = feasible_nodes(self.state, job)
        passes = ok[idx]
        bad = np.flatnonzero(~passes)
        if not len(bad):
            return list(names), {}, {}
        passed = [names[i] for i in np.flatnonzero(passes)]
        codes = self.codes(job, idx[bad])  # the filter's reasons, for the failed only
        messages = self._messages(job)
        failed: dict[str, str] = {}
        unresolvable: dict[str, str] = {}
        for i, code in zip(bad.tolist(), codes.tolist(), strict=True):
            (unresolvable if code in UNRESOLVABLE else failed)[names[i]] = messages[code]
        return passed, failed, unresolvable

    def reason(self, job: JobSpec, node: int) -> str:
        code = int(self.codes(job, np.array([node], dtype=np.intp))[0])
        return self._messages(job)[code] if code >= 0 else "it fits"

    def codes(self, job: JobSpec, idx: npt.NDArray[np.intp]) -> npt.NDArray[np.int8]:
        """Per node index: -1 (fits), an index of NODE_REASONS (the filter's reason),
        UNKNOWN (-1 in ``idx``: a name we do not know) or WRONG_MODEL (NEVER_FITS because
        the node's GPU model is not allowed)."""
        known = idx >= 0
        codes = np.full(len(idx), UNKNOWN, dtype=np.int8)
        codes[known] = node_reasons(self.state, job, idx[known])
        if job.num_gpu and job.allowed_models is not None:
            wrong = np.zeros(len(idx), dtype=bool)
            wrong[known] = ~self.state.model_mask(job.allowed_models)[idx[known]]
            codes[wrong & (codes == NEVER)] = WRONG_MODEL
        return codes

    @staticmethod
    def _messages(job: JobSpec) -> dict[int, str]:
        models = "|".join(sorted(job.allowed_models or ()))
        never = Reason.NEVER_FITS.value
        details = {
            Reason.NEVER_FITS: "the node is too small even when empty",
            Reason.CPU: f"less than {job.cpu_milli} milli-CPU free",
            Reason.MEMORY: f"less than {job.memory_mib} MiB memory free",
            Reason.GPU: f"fewer than {job.num_gpu} GPU(s) with {job.gpu_milli} milli free",
        }
        out = {i: f"{r.value}: {details[r]}" for i, r in enumerate(NODE_REASONS)}
        out[UNKNOWN] = "unknown node: not in the extender's cluster"
        out[WRONG_MODEL] = f"{never}: the node's GPU model is not in {{{models}}}"
        return out
