"""Which Ray nodes of the service's cluster are there: a node that goes away, one that
comes back (docs/live.md, "More than one node").

The service's cluster is read off Ray once, at start (``cluster.discover``); Ray nodes
are then watched by polling ``ray.nodes()`` on the round driver's clock, at most every
``every_s`` seconds. A Ray node that is no longer alive is *lost*: the scheduler's nodes
on it (one per GPU model) leave the decider's cluster, and the driver sends its jobs back
to the queue at their checkpoints. A Ray node restarted on the same machine joins under
a new node id; an alive node that no slot is bound to, at the lost node's address and
offering the same GPU models, is that node *returned*: the slots are bound to it and its
GPUs are placed on again; so is a lost node listed again under its own id (a Slurm node,
whose id is its name: runtime/executors/slurm). Any other new node is reported once as
*unused* (the cluster's shape is fixed while the service runs: restart it to use it).
Every change is counted in ``/metrics`` and written to the event log; none is silent.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from gpumosaic.runtime.cluster import LiveCluster, RayNode, ray_nodes

# How often the driver asks Ray for its nodes (seconds of the driver's clock, multiplied by
# the time scale so that it is about this often in wall time): a GCS call of a few ms;
# Ray itself needs a few seconds of missed health checks to call a node dead.
NODE_POLL_S = 1.0


class NodeEvent(enum.Enum):
    LOST = "node_lost"
    RETURNED = "node_returned"
    UNUSED = "node_unused"


@dataclass(frozen=True, slots=True)
class NodeChange:
    """One change of membership: ``nodes`` are the scheduler's nodes (indices of the
    cluster's spec) on the Ray node; none for an unused node."""

    event: NodeEvent
    ray_node_id: str
    ip: str
    nodes: tuple[int, ...]
    gpus: int
    models: tuple[tuple[str, int], ...]

    def describe(self) -> str:
        what = ", ".join(f"{m} x{c}" for m, c in self.models) or "no GPU model"
        where = f"node {self.ray_node_id[:12]} at {self.ip} ({what})"
        if self.event is NodeEvent.LOST:
            return f"{where} lost: {self.gpus} GPUs leave the cluster; its jobs are requeued"
        if self.event is NodeEvent.RETURNED:
            return f"{where} returned: {self.gpus} GPUs are scheduled again"
        return f"{where} joined but is not in the service's cluster (restart serve to use it)"


def ray_membership() -> list[RayNode]:
    """The alive Ray nodes that offer gpumosaic GPU models (``ray`` is connected)."""
    import ray

    return ray_nodes(ray.nodes())


class NodeWatcher:
    """The one owner of the service's node membership: which Ray node each slot of the
    cluster is bound to, and which are away. ``poll`` answers what changed since."""

    def __init__(
        self,
        cluster: LiveCluster,
        list_nodes: Callable[[], Sequence[RayNode]] = ray_membership,
        every_s: float = NODE_POLL_S,
    ) -> None:
        self.cluster = cluster
        self.list_nodes = list_nodes
        self.every_s = every_s
        bound = {s.ray_node_id for s in cluster.slots}
        # What each bound Ray node offered when it was last seen (a return must match it).
        self.known: dict[str, RayNode] = {r.node_id: r for r in list_nodes() if r.node_id in bound}
        for slot in cluster.slots:  # a slot Ray no longer listed at start: its node as seen
            self.known.setdefault(slot.ray_node_id, RayNode(slot.ray_node_id, slot.ip, ()))
        self.away: set[str] = set()  # bound Ray node ids that are lost
        self.unused: set[str] = set()  # unbound nodes already reported
        self.lost_total = 0
        self.returned_total = 0
        self.poll_failures = 0  # Ray did not answer: counted, membership kept as it was
        self.last_failure = ""
        self._polled_at: float | None = None

    def metrics(self) -> dict[str, float]:
        """For ``/metrics``: changes so far, and the GPUs scheduled now."""
        total = sum(nd.num_gpus for nd in self.cluster.spec.nodes)
        return {
            "ray_nodes_lost_total": self.lost_total,
            "ray_nodes_returned_total": self.returned_total,
            "ray_nodes_away": len(self.away),
            "ray_nodes_unused": len(self.unused),
            "cluster_gpus": total - self.gpus_away,
            "cluster_gpus_away": self.gpus_away,
            "ray_node_polls_failed_total": self.poll_failures,
        }

    @property
    def gpus_away(self) -> int:
        spec = self.cluster.spec
        return sum(spec.nodes[i].num_gpus for rid in self.away for i in self.cluster.nodes_on(rid))

    def poll(self, now: float) -> list[NodeChange]:
        """What changed since the last poll (nothing before ``every_s`` has passed)."""
        if self._polled_at is not None and now - self._polled_at < self.every_s:
            return []
        self._polled_at = now
        try:
            alive = self.list_nodes()
        except Exception as err:  # a GCS hiccup must not stop the round loop
            self.poll_failures += 1
            self.last_failure = f"{type(err).__name__}: {err}"[:300]
            return []
        return self.update(alive)

    def update(self, alive: Sequence[RayNode]) -> list[NodeChange]:
        """Apply one listing of the alive nodes: losses first, then returns and unused."""
        by_id = {r.node_id: r for r in alive}
        changes: list[NodeChange] = []
        for rid in sorted(self.known):
            if rid not in by_id and rid not in self.away:
                self.away.add(rid)
                self.lost_total += 1
                changes.append(self._change(NodeEvent.LOST, self.known[rid]))
        for r in alive:
            if r.node_id in self.away and r.models == self.known[r.node_id].models:
                # A node back under its own id (a Slurm node, named by the admin).
                self.away.discard(r.node_id)
                self.known[r.node_id] = r
                self.returned_total += 1
                changes.append(self._change(NodeEvent.RETURNED, r))
                continue
            if r.node_id in self.known:
                continue
            # A node restarted quickly may join before Ray calls its old self dead: one
            # reported unused may still stand for a node lost later.
            old = self._lost_match(r)
            if old is None:
                if r.node_id not in self.unused:
                    self.unused.add(r.node_id)
                    changes.append(NodeChange(NodeEvent.UNUSED, r.node_id, r.ip, (), 0, r.models))
                continue
            self.unused.discard(r.node_id)
            self.cluster = self.cluster.rebind(old, r)
            del self.known[old]
            self.away.discard(old)
            self.known[r.node_id] = r
            self.returned_total += 1
            changes.append(self._change(NodeEvent.RETURNED, r))
        return changes

    def _lost_match(self, node: RayNode) -> str | None:
        """The lost node ``node`` stands for: same address and the same GPU models."""
        for rid in sorted(self.away):
            old = self.known[rid]
            if old.ip == node.ip and old.models == node.models:
                return rid
        return None

    def _change(self, event: NodeEvent, node: RayNode) -> NodeChange:
        nodes = self.cluster.nodes_on(node.node_id)
        gpus = sum(self.cluster.spec.nodes[i].num_gpus for i in nodes)
        return NodeChange(event, node.node_id, node.ip, nodes, gpus, node.models)
