"""Ray node membership without Ray: the watcher's answers, the decider's cluster when a
node goes away and comes back, and the driver's hook (a lost node's jobs go back to the
queue at their checkpoints and run on the node left). The same on a real two-node Ray
cluster: test_two_nodes.py."""

from __future__ import annotations

from pathlib import Path

from builders import Bench, FakeClock

from gpumosaic.mechanisms.rounds.decision import RoundPlan
from gpumosaic.mechanisms.rounds.live.driver import RoundDriver
from gpumosaic.run.serve import ServeDescription, build_decider
from gpumosaic.runtime.cluster import LiveCluster, RayNode, discover
from gpumosaic.runtime.executors.contract import InProcessExecutor
from gpumosaic.runtime.leases import LeaseTable
from gpumosaic.runtime.state.store import Store
from gpumosaic.runtime.supervisor.config import DriverConfig
from gpumosaic.runtime.supervisor.nodes import NodeEvent, NodeWatcher

A = RayNode("aaaa1111", "10.0.0.1", (("V100", 1),))
B = RayNode("bbbb2222", "10.0.0.1", (("V100", 1),))  # the same machine: same address
B_AGAIN = RayNode("cccc3333", "10.0.0.1", (("V100", 1),))  # B restarted: a new id
OTHER = RayNode("dddd4444", "10.0.0.9", (("K80", 2),))


class Listing:
    def __init__(self, *nodes: RayNode) -> None:
        self.nodes = list(nodes)

    def __call__(self) -> list[RayNode]:
        return list(self.nodes)


def two_nodes() -> LiveCluster:
    return discover([A, B], None)


def test_nodes_on_one_address_get_names_of_their_own() -> None:
    live = two_nodes()
    names = [n.name for n in live.spec.nodes]
    assert len(set(names)) == 2 and all("#" in n for n in names), names
    assert [s.ray_node_id for s in live.slots] == [A.node_id, B.node_id]


def test_watcher_reports_loss_return_and_unused_once() -> None:
    live = two_nodes()
    listing = Listing(A, B)
    watcher = NodeWatcher(live, listing, every_s=1.0)
    assert watcher.poll(0.0) == []
    listing.nodes = [A]
    assert watcher.poll(0.5) == []  # not yet time to ask
    (lost,) = watcher.poll(1.0)
    assert lost.event is NodeEvent.LOST and lost.nodes == (1,) and lost.gpus == 1
    assert watcher.metrics()["cluster_gpus"] == 1
    assert watcher.poll(2.0) == []  # said once
    listing.nodes = [A, OTHER]
    (unused,) = watcher.poll(3.0)
    assert unused.event is NodeEvent.UNUSED and unused.nodes == ()
    listing.nodes = [A, OTHER, B_AGAIN]
    (back,) = watcher.poll(4.0)
    assert back.event is NodeEvent.RETURNED and back.nodes == (1,)
    assert watcher.cluster.slots[1].ray_node_id == B_AGAIN.node_id
    assert watcher.cluster.slots[1].device_offset == live.slots[1].device_offset
    m = watcher.metrics()
    assert (m["ray_nodes_lost_total"], m["ray_nodes_returned_total"]) == (1, 1)
    assert (m["cluster_gpus"], m["ray_nodes_unused"]) == (2, 1)


def test_a_failed_listing_is_counted_and_changes_nothing() -> None:
    listing = Listing(A, B)
    watcher = NodeWatcher(two_nodes(), listing, every_s=0.0)

    def broken() -> list[RayNode]:
        raise ConnectionError("GCS unavailable")

    watcher.list_nodes = broken
    assert watcher.poll(1.0) == []
    assert watcher.metrics()["ray_node_polls_failed_total"] == 1
    assert "GCS unavailable" in watcher.last_failure
    assert watcher.metrics()["cluster_gpus"] == 2


def test_a_node_back_before_its_old_self_is_dead_still_returns() -> None:
    listing = Listing(A, B)
    watcher = NodeWatcher(two_nodes(), listing, every_s=0.0)
    listing.nodes = [A, B, B_AGAIN]  # the restart joined; Ray has not yet called B dead
    assert [c.event for c in watcher.poll(1.0)] == [NodeEvent.UNUSED]
    listing.nodes = [A, B_AGAIN]
    events = [c.event for c in watcher.poll(2.0)]
    assert events == [NodeEvent.LOST, NodeEvent.RETURNED]


def bench(tmp: Path, listing: Listing) -> Bench:
    live = two_nodes()
    clock = FakeClock()
    store = Store(tmp / "state.db")
    table = LeaseTable(store, clock)
    executor = InProcessExecutor(table, clock, lambda job, model: 2.0)
    config = ServeDescription(policy="max_min_fairness_perf", round_s=10.0, state=str(tmp))
    decider, priors = build_decider(config, live)
    plans: list[RoundPlan] = []
    driver = RoundDriver(
        store,
        table,
        executor,
        decider,
        live,
        priors,
        DriverConfig(round_s=10.0, data_dir=str(tmp)),
        clock=clock,
        on_plan=plans.append,
        nodes=NodeWatcher(live, listing, every_s=1.0),
    )
    return Bench(store, driver, clock, executor, plans)


def nodes_of(plan: RoundPlan) -> dict[int, set[int]]:
    return {e.job_ids[0]: {p.node for p in e.parts} for e in plan.entries}


def test_decider_places_nothing_on_a_lost_node_and_again_once_back(tmp_path: Path) -> None:
    listing = Listing(A, B)
    b = bench(tmp_path, listing)
    decider = b.driver.decider
    ids = [b.submit(10_000) for _ in range(2)]
    plan = b.run_round(ticks=3, dt=1.0)
    assert sorted(n for s in nodes_of(plan).values() for n in s) == [0, 1]
    listing.nodes = [A]
    b.clock.t += 1.0
    b.driver.tick(b.clock())  # the watcher sees the loss
    assert decider.nodes_away == {1} and decider.capacity_gpus.tolist() == [1.0]
    for _ in range(4):
        plan = b.run_round(ticks=12, dt=1.0)
        assert all(s == {0} for s in nodes_of(plan).values()), nodes_of(plan)
        assert len(plan.entries) == 1
    jobs = {j.id: j for j in b.store.jobs()}
    assert {j.state for j in jobs.values()} <= {"queued", "running"}
    # Both jobs ran on node 0 after the loss (time sharing), none lost its progress.
    assert all(jobs[i].steps_done > 0 for i in ids)
    kinds = [e.kind for e in b.store.events()]
    assert kinds.count(NodeEvent.LOST.value) == 1
    listing.nodes = [A, B_AGAIN]
    b.clock.t += 1.0
    b.driver.tick(b.clock())
    assert decider.nodes_away == set() and decider.capacity_gpus.tolist() == [2.0]
    assert b.driver.cluster.slots[1].ray_node_id == B_AGAIN.node_id
    plan = b.run_round(ticks=12, dt=1.0)
    assert sorted(n for s in nodes_of(plan).values() for n in s) == [0, 1]
    assert NodeEvent.RETURNED.value in [e.kind for e in b.store.events()]
    decider.state.check_invariants()


def test_a_gang_across_nodes_waits_while_a_node_is_away(tmp_path: Path) -> None:
    listing = Listing(A, B)
    b = bench(tmp_path, listing)
    gang = b.submit(10_000, gpus=2)
    plan = b.run_round(ticks=3, dt=1.0)
    assert nodes_of(plan) == {gang: {0, 1}}
    listing.nodes = [A]
    b.clock.t += 1.0
    b.driver.tick(b.clock())
    plan = b.run_round(ticks=12, dt=1.0)
    assert len(plan.entries) == 0
    assert b.store.job(gang).state == "queued"  # waits for the node, never rejected
    late = b.submit(10_000, gpus=2)  # submitted while a node is away: admitted
    plan = b.run_round(ticks=12, dt=1.0)
    assert b.store.job(late).state == "queued"
    listing.nodes = [A, B_AGAIN]
    b.clock.t += 1.0
    b.driver.tick(b.clock())
    plan = b.run_round(ticks=12, dt=1.0)
    assert len(plan.entries) == 1 and nodes_of(plan)[plan.entries[0].job_ids[0]] == {0, 1}


def test_shared_gpus_on_a_lost_node_are_given_back_whole(tmp_path: Path) -> None:
    listing = Listing(A, B)
    b = bench(tmp_path, listing)
    ids = [b.submit(10_000, gpu_milli=500) for _ in range(4)]  # two per GPU
    plan = b.run_round(ticks=3, dt=1.0)
    assert {n for s in nodes_of(plan).values() for n in s} == {0, 1}
    listing.nodes = [A]
    b.clock.t += 1.0
    b.driver.tick(b.clock())
    for _ in range(3):
        plan = b.run_round(ticks=12, dt=1.0)
        assert nodes_of(plan) and all(s == {0} for s in nodes_of(plan).values())
        assert sum(e.parts[0].gpu_milli for e in plan.entries) <= 1000
    state = b.driver.decider.state
    state.check_invariants()
    assert int(state.gpu_free[1].sum()) == 0  # held by the placeholder, nothing else
    assert {j.state for j in b.store.jobs() if j.id in ids} <= {"queued", "running"}


def test_a_node_back_under_its_own_id_returns() -> None:
    """A Slurm node is named by the admin: lost (down, drained) and back, it keeps its id."""
    listing = Listing(A, B)
    watcher = NodeWatcher(two_nodes(), listing)
    listing.nodes = [A]
    assert [c.event for c in watcher.update(listing())] == [NodeEvent.LOST]
    listing.nodes = [A, B]
    changes = watcher.update(listing())
    assert [(c.event, c.ray_node_id) for c in changes] == [(NodeEvent.RETURNED, B.node_id)]
    assert watcher.away == set() and watcher.returned_total == 1
    assert watcher.update(listing()) == []
