"""``serve --mechanism gandiva`` follows its nodes as the round service does, through the
one supervisor (``runtime/supervisor``) and its node watcher: a node that leaves sends
its jobs back to the decider's queue and they resume elsewhere from their checkpoints;
one that returns is placed on again. In-process virtual jobs on a fake clock, the Ray
listing faked."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from test_gandiva_live import FakeClock

from gpumosaic.mechanisms.gandiva import GandivaConfig, GandivaDecider
from gpumosaic.mechanisms.gandiva.live.driver import GandivaDriver
from gpumosaic.mechanisms.gandiva.live.throughputs import LiveThroughputs
from gpumosaic.policies.ordering import build_queue_order
from gpumosaic.runtime.cluster import RayNode, discover
from gpumosaic.runtime.executors.contract import InProcessExecutor
from gpumosaic.runtime.jobs.submission import JobSubmission
from gpumosaic.runtime.leases import LeaseTable
from gpumosaic.runtime.state.store import Store
from gpumosaic.runtime.supervisor.config import DriverConfig
from gpumosaic.runtime.supervisor.nodes import NodeWatcher

A = RayNode("ray-a", "10.0.0.1", (("V100", 1),))
B = RayNode("ray-b", "10.0.0.2", (("V100", 1),))
B_AGAIN = RayNode("ray-b2", "10.0.0.2", (("V100", 1),))  # B restarted: a new id
MOVING = GandivaConfig(quantum_s=5.0, switch_s=0.5, packing=False, migration=True)


def test_a_lost_nodes_job_resumes_elsewhere_and_a_returned_node_is_used(tmp_path: Path) -> None:
    listing = [A, B]
    live = discover(listing, None)
    clock = FakeClock()
    store = Store(tmp_path / "state.db")
    table = LeaseTable(store, clock)
    executor = InProcessExecutor(table, clock, lambda job, model: 2.0)
    decider = GandivaDecider(
        live.spec, LiveThroughputs.load(), MOVING, np.random.default_rng(0),
        order=build_queue_order("fifo"),
    )  # fmt: skip
    watcher = NodeWatcher(live, lambda: listing, every_s=1.0)
    driver = GandivaDriver(
        store, table, executor, decider, live, DriverConfig(data_dir=str(tmp_path)),
        clock=clock, nodes=watcher,
    )  # fmt: skip

    def tick(seconds: float) -> None:
        for _ in range(int(seconds / 0.5)):
            clock.t += 0.5
            driver.tick(clock())

    jobs = [store.add_job(JobSubmission(command="x", steps=100), clock(), 2) for _ in range(2)]
    tick(5.0)
    on = {row.job_id: row.parts[0][0] for row in store.leases() if row.active}
    assert sorted(on.values()) == [0, 1]  # one job per node
    moved = next(j for j, node in on.items() if node == 1)

    listing = [A]  # B is lost
    tick(5.0)
    assert decider.away == {1}
    relaunched = [row for row in store.leases() if row.job_id == moved and row.active]
    assert [row.parts[0][0] for row in relaunched] == [0]  # time-sliced on A now
    row = store.job(moved)
    assert row is not None and row.steps_done > 0  # its checkpoint, kept
    assert "node_lost" in {e.kind for e in store.events()}

    listing = [A, B_AGAIN]  # B is back: the waiting job spreads onto it
    tick(5.0)
    assert decider.away == set()
    assert any(row.parts[0][0] == 1 for row in store.leases() if row.active)
    tick(200.0)
    assert {j.state for j in store.jobs()} == {"done"} and len(jobs) == 2
    assert driver.metrics()["gandiva_migrations_total"] >= 1


def test_a_gang_across_nodes_waits_while_a_node_is_away(tmp_path: Path) -> None:
    """As the rounds' (tests/runtime/service/test_nodes.py): the gang leaves with the lost
    node, waits in the queue (one node cannot hold it) and runs again once it is back,
    from its checkpoint."""
    listing = [A, B]
    live = discover(listing, None)
    clock = FakeClock()
    store = Store(tmp_path / "state.db")
    table = LeaseTable(store, clock)
    executor = InProcessExecutor(table, clock, lambda job, model: 2.0)
    decider = GandivaDecider(
        live.spec, LiveThroughputs.load(), MOVING, np.random.default_rng(0),
        order=build_queue_order("fifo"),
    )  # fmt: skip
    driver = GandivaDriver(
        store, table, executor, decider, live, DriverConfig(data_dir=str(tmp_path)),
        clock=clock, nodes=NodeWatcher(live, lambda: listing, every_s=1.0),
    )  # fmt: skip

    def tick(seconds: float) -> None:
        for _ in range(int(seconds / 0.5)):
            clock.t += 0.5
            driver.tick(clock())

    gang = store.add_job(JobSubmission(command="x", steps=60, gpus=2), clock(), 2)
    tick(5.0)
    (lease,) = [row for row in store.leases() if row.active]
    assert {part[0] for part in lease.parts} == {0, 1}
    listing = [A]
    tick(5.0)
    assert [j.id for j in decider.queue] == [gang] and not any(r.active for r in store.leases())
    row = store.job(gang)
    assert row is not None and 0 < row.steps_done < 60
    listing = [A, B_AGAIN]
    tick(60.0)
    row = store.job(gang)
    assert row is not None and row.state == "done"
    decider.sets.check()
