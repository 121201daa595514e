"""ExtenderService: the one owner of the live cluster's GPU occupancy and of the
placement strategy that decides on it. The HTTP app and the API-server watch call it.

Threads: every public method may be called from many threads at once. ``_lock`` guards
the in-memory state (ClusterState, the strategy's caches, the pod tables) and is held only
for in-memory work. A bind also holds its node's lock for the whole bind, API calls
included, so binds to one node are serialized while binds to different nodes overlap;
inside, the chosen GPUs are checked against the current state and reserved before any
I/O, and released again if the bind fails. Two binds can therefore never over-commit a
GPU, whatever kube-scheduler's cache believed when it chose the node.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from gpumosaic.apps.extender.backend import Backend, BindError, RngState, StateUnavailable
from gpumosaic.apps.extender.decision import bind_strategy, decide, gpu_assignment, warm_scores
from gpumosaic.apps.extender.nodes import NodeTable
from gpumosaic.apps.extender.target import TargetSource
from gpumosaic.apps.extender.vocabulary import (
    ASSUME_TIME,
    FINISHED_PHASES,
    GPU_INDEX,
    BoundPod,
    NodeReading,
    PodError,
    PodRequest,
    bound_pod,
    gpu_index_annotation,
    pod_request,
)
from gpumosaic.apps.extender.wire import (
    ExtenderArgs,
    ExtenderBindingArgs,
    filter_result,
    host_priority_list,
)
from gpumosaic.errors import BookkeepingError
from gpumosaic.model.job import JobSpec
from gpumosaic.model.state import Assignment
from gpumosaic.placement.base import PlacementStrategy
from gpumosaic.placement.filter import feasible_nodes
from gpumosaic.placement.workload import TargetWorkload
from gpumosaic.run.parts import build_placement_for

CACHE_SIZE = 20_000  # pods remembered between filter and bind (bounded: memory stays flat)
# Returned by _reserve for a pod already bound to the same node (a retried bind).
ALREADY_BOUND = Assignment(-1, -1, (), 0, 0, 0)
PROBE = JobSpec(id=0, arrival_s=0.0, job_type="probe", num_gpu=1, gpu_milli=1000, work=0.0)


@dataclass(slots=True)
class Counters:
    """Everything that did not go the plain way; shown in /state and /metrics."""

    node_fallbacks: int = 0  # kube-scheduler's candidates lacked the strategy's node
    gpu_fallbacks: int = 0  # a strategy without a per-node GPU rule: best fit used
    bind_rejected: int = 0  # the node no longer had room at bind
    bind_errors: int = 0  # the backend failed to record a bind
    adopt_conflicts: int = 0  # a bound pod's gpu-index does not fit the rebuilt state
    untracked_gpu_pods: int = 0  # GPU pods bound without gpu-index (not by us)
    unreadable_pods: int = 0  # bound pods whose annotations cannot be parsed
    dropped_pods: int = 0  # pods on nodes that left the cluster
    rebuilds: int = 0
    conflicts: list[str] = field(default_factory=list)  # the first few, by pod


@dataclass(slots=True)
class _Held:
    request: PodRequest
    assignment: Assignment
    untracked: bool = False


def generator_from_state(state: RngState) -> np.random.Generator:
    bit_generator = getattr(np.random, str(state["bit_generator"]))()
    bit_generator.state = state
    return np.random.Generator(bit_generator)


class ExtenderService:
    def __init__(
        self,
        backend: Backend,
        placement: str,
        target: TargetSource,
        seed: int = 0,
        rng: np.random.Generator | None = None,
    ) -> None:
        build_placement_for(placement, target.workload or TargetWorkload.from_jobs([PROBE]))
        self.backend = backend
        self.placement = placement
        self.target = target
        self.counters = Counters()
        self._lock = threading.RLock()
        self._node_locks: dict[str, threading.Lock] = {}
        self._seen: OrderedDict[str, tuple[PodRequest, int]] = OrderedDict()
        self._pending: OrderedDict[str, tuple[Assignment, int]] = OrderedDict()
        self._held: dict[str, _Held] = {}
        self._next_id = 0
        snapshot = backend.load()
        if snapshot.rng_initial is not None:
            self.rng = generator_from_state(snapshot.rng_initial)
        else:
            self.rng = rng if rng is not None else np.random.default_rng(seed)
            backend.save_rng_initial(self.rng.bit_generator.state)
        readings = self._readable(snapshot.pods)
        target.seed([bp.request.job(0) for bp in readings])
        self._rebuild(snapshot.nodes, readings)
        if snapshot.rng_current is not None:
            self.rng.bit_generator.state = snapshot.rng_current

    # -- building -------------------------------------------------------------------------

    def _readable(self, pods: tuple[dict[str, Any], ...]) -> list[BoundPod]:
        out = []
        for pod in pods:
            try:
                bp = bound_pod(pod)
            except PodError:
                self.counters.unreadable_pods += 1
                continue
            if bp is not None:
                out.append(bp)
        return out

    def _rebuild(self, nodes: tuple[NodeReading, ...], pods: list[BoundPod]) -> None:
        """A fresh ClusterState and strategy for ``nodes``, holding ``pods``."""
        with self._lock:
            self.nodes = NodeTable(nodes)
            self._held.clear()
            self._pending.clear()
            self._strategy: PlacementStrategy | None = None
            self._build_strategy()
            for bp in pods:
                self._adopt(bp)
            self.counters.rebuilds += 1

    def _build_strategy(self) -> None:
        if self.target.workload is None:
            return  # learned target and no pod seen yet: built at the first pod
        self._strategy = build_placement_for(self.placement, self.target.workload)
        bind_strategy(self._strategy, self.nodes.state, self.rng)
        warm_scores(self._strategy, self.nodes.state, self.target.workload)

    def _job_id(self) -> int:
        self._next_id += 1
        return self._next_id

    def _adopt(self, bp: BoundPod) -> None:
        """Hold a pod bound before we saw it (restart, another binder) from its annotations."""
        node = self.nodes.index.get(bp.node)
        if node is None:
            self.counters.dropped_pods += 1
            return
        r = bp.request
        untracked = bp.gpus is None
        if untracked:
            self.counters.untracked_gpu_pods += 1
        gpus = bp.gpus or ()
        milli = r.gpu_milli if gpus else 0
        a = Assignment(self._job_id(), node, gpus, milli, r.cpu_milli, r.memory_mib)
        try:
            self.nodes.state.allocate(a)
        except BookkeepingError as err:
            self.counters.adopt_conflicts += 1
            if len(self.counters.conflicts) < 50:
                self.counters.conflicts.append(f"{r.label} on {bp.node}: {err}")
            return
        self._held[r.key] = _Held(r, a, untracked)

    def resync(self, nodes: tuple[NodeReading, ...], pods: tuple[dict[str, Any], ...]) -> None:
        """Rebuild from a fresh list of the API server (after a watch expired)."""
        with self._lock:
            self._rebuild(nodes, self._readable(pods))

    def replace_nodes(self, nodes: tuple[NodeReading, ...]) -> None:
        """The API server's node set changed: rebuild, keeping every held pod that stays."""
        with self._lock:
            kept = [
                BoundPod(h.request, self.nodes.names[h.assignment.node], h.assignment.gpus)
                for h in self._held.values()
            ]
            self._rebuild(nodes, kept)

    # -- the verbs --------------------------------------------------------------------------

    def _observe(self, request: PodRequest) -> int:
        """Remember the pod for bind (bounded LRU) and feed the learned target workload."""
        known = self._seen.get(request.key)
        if known is not None and known[0] == request:
            self._seen.move_to_end(request.key)
            return known[1]
        job_id = self._job_id()
        self._seen[request.key] = (request, job_id)
        if len(self._seen) > CACHE_SIZE:
            self._seen.popitem(last=False)
        if known is None and self.target.observe(request.job(job_id)) is not None:
            self._rebuild_for_target()
        return job_id

    def _rebuild_for_target(self) -> None:
        # A new ClusterState with the new strategy: FGD's trackers are kept per state and
        # workload, so reusing the state would keep one dead tracker per refresh.
        kept = [
            BoundPod(h.request, self.nodes.names[h.assignment.node], h.assignment.gpus)
            for h in self._held.values()
        ]
        self._rebuild(self.nodes.readings, kept)

    def filter(self, args: ExtenderArgs) -> dict[str, Any]:
        """ExtenderFilterResult; PodError (HTTP 422) for a pod that cannot be read."""
        request = pod_request(args.Pod)
        names = args.node_names()
        with self._lock:
            job = request.job(self._observe(request))
            passed, failed, unresolvable = self.nodes.split(job, names)
        return filter_result(args, passed, failed, unresolvable)

    def prioritize(self, args: ExtenderArgs) -> list[dict[str, Any]]:
        """Scores 0..10 for the named nodes; the strategy's choice gets 10 (decision.py).
        PodError (HTTP 422) for a pod that cannot be read."""
        names, _, scores = self._scores(args)
        return host_priority_list(names, scores.tolist())

    def prioritize_encoded(self, args: ExtenderArgs) -> bytes:
        """``prioritize`` as the JSON bytes of the HostPriorityList (the HTTP path)."""
        with self._lock:  # the table must not be rebuilt between scoring and encoding
            names, idx, scores = self._scores(args)
            return self.nodes.encode_priorities(names, idx, scores)

    def _scores(
        self, args: ExtenderArgs
    ) -> tuple[list[str], npt.NDArray[np.intp], npt.NDArray[np.int64]]:
        request = pod_request(args.Pod)
        names = args.node_names()
        with self._lock:
            job = request.job(self._observe(request))
            idx = self.nodes.indices(names)
            candidates = self.nodes.feasible_at(job, idx)
            if self._strategy is None:
                self._build_strategy()
            assert self._strategy is not None
            decision = decide(self._strategy, self.nodes.state, job, candidates, self.rng)
            if decision.fallback:
                self.counters.node_fallbacks += 1
            if decision.assignment is not None:
                a = decision.assignment
                self._pending[request.key] = (a, int(self.nodes.state.node_version[a.node]))
                if len(self._pending) > CACHE_SIZE:
                    self._pending.popitem(last=False)
            by_node = decision.score_of(self.nodes.state.num_nodes + 1)  # [-1]: unknown
            return names, idx, by_node[idx]

    def _node_lock(self, name: str) -> threading.Lock:
        with self._lock:
            lock = self._node_locks.get(name)
            if lock is None:
                lock = self._node_locks[name] = threading.Lock()
            return lock

    def _request_for_bind(self, args: ExtenderBindingArgs) -> PodRequest | str:
        key = args.PodUID or f"{args.PodNamespace}/{args.PodName}"
        with self._lock:
            seen = self._seen.get(key)
        if seen is not None:
            return seen[0]
        pod = self.backend.read_pod(args.PodNamespace, args.PodName)
        if pod is None:
            return (
                f"pod {args.PodNamespace}/{args.PodName} was not filtered by this extender "
                "(restarted since?); kube-scheduler will retry it"
            )
        try:
            request = pod_request(pod)
        except PodError as err:
            return str(err)
        with self._lock:
            self._observe(request)
        return request

    def bind(self, args: ExtenderBindingArgs) -> dict[str, str]:
        """Bind the pod to ``args.Node`` with the strategy's GPUs; {"Error": ""} or why not."""
        request = self._request_for_bind(args)
        if isinstance(request, str):
            return {"Error": request}
        with self._node_lock(args.Node):
            reserved = self._reserve(request, args.Node)
            if isinstance(reserved, str):
                return {"Error": reserved}
            if reserved is ALREADY_BOUND:
                return {"Error": ""}  # a retried bind of a pod bound here: same answer
            annotations = {
                GPU_INDEX: gpu_index_annotation(reserved.gpus),
                ASSUME_TIME: str(time.time_ns()),
            }
            try:
                self.backend.bind(request, args.Node, annotations, self.rng.bit_generator.state)
            except BindError as err:
                with self._lock:
                    self.counters.bind_errors += 1
                    if self._held.pop(request.key, None) is not None:
                        self.nodes.state.release(reserved.job_id)
                if isinstance(err, StateUnavailable):
                    raise  # HTTP 503: the state, not the pod, is the problem
                return {"Error": f"bind {request.label} to {args.Node}: {err}"}
        return {"Error": ""}

    def _reserve(self, request: PodRequest, node_name: str) -> Assignment | str:
        """Choose the GPUs on the node against the current state and hold them."""
        with self._lock:
            job = request.job(self._observe(request))  # first: it may rebuild the state
            held = self._held.get(request.key)
            if held is not None:
                bound_to = self.nodes.names[held.assignment.node]
                if bound_to == node_name:
                    return ALREADY_BOUND
                return f"pod {request.label} is already bound to {bound_to}"
            node = self.nodes.index.get(node_name)
            if node is None:
                return f"unknown node {node_name!r}: not in the extender's cluster"
            state = self.nodes.state
            if not feasible_nodes(state, job)[node]:
                self.counters.bind_rejected += 1
                reason = self.nodes.reason(job, node)
                return f"node {node_name} has no room for {request.label} any more: {reason}"
            if self._strategy is None:
                self._build_strategy()
            assert self._strategy is not None
            pending = self._pending.pop(request.key, None)
            if pending is not None and pending[0].node == node:
                a = pending[0]
                if pending[1] != int(state.node_version[node]):  # the node changed since
                    a, fallback = gpu_assignment(self._strategy, state, job, node, self.rng)
                    self.counters.gpu_fallbacks += fallback
            else:
                # No prioritize for this pod (kube-scheduler skips it when one node passes
                # the filter): decide now, as fill's place() would.
                choice = self._strategy.place(state, job, self.rng)
                if choice is not None and choice.node == node:
                    a = choice
                else:
                    a, fallback = gpu_assignment(self._strategy, state, job, node, self.rng)
                    self.counters.gpu_fallbacks += fallback
            a = Assignment(job.id, a.node, a.gpus, a.gpu_milli, a.cpu_milli, a.memory_mib)
            state.allocate(a)  # the feasibility check above makes this safe
            self._held[request.key] = _Held(request, a)
            return a

    def release(self, key: str) -> bool:
        """Free a pod's share (pod deleted or finished); False if it held nothing. The
        record goes first: if it cannot be written (StateUnavailable), the pod stays held
        here too, so the answer, the memory and a restart all agree."""
        with self._lock:
            held = self._held.get(key)
        if held is None:
            return False
        self.backend.release(key)  # outside the lock: a slow write stalls no filter
        with self._lock:
            current = self._held.get(key)  # a rebuild meanwhile holds it anew
            if current is not None and current.request == held.request:
                del self._held[key]
                self.nodes.state.release(current.assignment.job_id)
                self._seen.pop(key, None)
        return True

    def release_by_name(self, namespace: str, name: str) -> bool:
        label = f"{namespace}/{name}"
        with self._lock:
            key = next((k for k, h in self._held.items() if h.request.label == label), None)
        return key is not None and self.release(key)

    def on_pod(self, event: str, pod: dict[str, Any]) -> None:
        """A watch event from the API server: adopt newly bound pods, free finished ones."""
        meta = pod.get("metadata") or {}
        key = str(meta.get("uid") or f"{meta.get('namespace')}/{meta.get('name')}")
        phase = (pod.get("status") or {}).get("phase")
        if event == "DELETED" or phase in FINISHED_PHASES:
            self.release(key)
            return
        try:
            bp = bound_pod(pod)
        except PodError:
            with self._lock:
                self.counters.unreadable_pods += 1
            return
        if bp is None:
            return  # not bound yet (e.g. our own annotation patch, before the Binding)
        with self._lock:
            if bp.request.key not in self._held:
                self._adopt(bp)

    # -- views ------------------------------------------------------------------------------

    def held(self) -> list[tuple[PodRequest, Assignment, bool]]:
        with self._lock:
            return [(h.request, h.assignment, h.untracked) for h in self._held.values()]

    def check_invariants(self) -> None:
        with self._lock:
            self.nodes.state.check_invariants()
