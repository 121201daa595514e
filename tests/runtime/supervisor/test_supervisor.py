"""The process supervisor's logic in-process, on a fake clock: launch, deferred launch,
exits (done, retried, failed, lost), cancellation, restart recovery, the silent-lease
check and node loss and return. A scripted executor stands in for processes: the test
says when a lease's processes are gone and how."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from gpumosaic.model.plan import PlannedEntity
from gpumosaic.model.state import Assignment
from gpumosaic.results.outcome import Outcome
from gpumosaic.runtime.cluster import LiveCluster, RayNode, discover
from gpumosaic.runtime.executors.contract import ExitReport, LaunchSpec
from gpumosaic.runtime.jobs.submission import JobSubmission
from gpumosaic.runtime.leases import LeaseTable, LiveLease
from gpumosaic.runtime.state.store import Store
from gpumosaic.runtime.supervisor.config import DriverConfig
from gpumosaic.runtime.supervisor.nodes import NodeChange, NodeEvent, NodeWatcher
from gpumosaic.runtime.supervisor.processes import Supervisor
from gpumosaic.runtime.supervisor.requests import LeaseRequest

A = RayNode("node-a", "10.0.0.1", (("V100", 1),))
B = RayNode("node-b", "10.0.0.2", (("V100", 1),))


@dataclass
class FakeClock:
    t: float = 1_000.0

    def __call__(self) -> float:
        return self.t


@dataclass
class ScriptedExecutor:
    """Records what the supervisor asks; ``exits`` are reported at the next poll."""

    launched: list[LaunchSpec] = field(default_factory=list)
    stopped: list[str] = field(default_factory=list)
    reaped: list[str] = field(default_factory=list)
    exits: list[ExitReport] = field(default_factory=list)

    def launch(self, spec: LaunchSpec) -> None:
        self.launched.append(spec)

    def stop(self, lease_id: str, grace_s: float) -> None:
        self.stopped.append(lease_id)

    def poll(self) -> list[ExitReport]:
        out, self.exits = self.exits, []
        return out

    def reap(self, lease_id: str, ranks: int) -> None:
        self.reaped.append(lease_id)

    def shutdown(self) -> None:
        pass


@dataclass
class Mechanism:
    """Answers as a mechanism's driver would, and records what it was told."""

    done_at: float = 100.0  # all steps done at this count
    started: list[str] = field(default_factory=list)
    ended_leases: list[str] = field(default_factory=list)
    ended_jobs: list[tuple[int, Outcome]] = field(default_factory=list)
    changes: list[NodeEvent] = field(default_factory=list)

    def all_steps_done(self, job_id: int, steps: float) -> bool:
        return steps >= self.done_at

    def lease_started(self, request: LeaseRequest, lease_id: str, now: float) -> None:
        self.started.append(lease_id)

    def lease_ended(self, job_id: int, lease_id: str, lease: LiveLease | None, now: float) -> None:
        self.ended_leases.append(lease_id)

    def job_ended(self, job_id: int, outcome: Outcome, now: float) -> None:
        self.ended_jobs.append((job_id, outcome))

    def nodes_changed(self, change: NodeChange, now: float) -> None:
        self.changes.append(change.event)


@dataclass
class Rig:
    store: Store
    table: LeaseTable
    executor: ScriptedExecutor
    mechanism: Mechanism
    clock: FakeClock
    sup: Supervisor

    def submit(self, steps: float = 100.0, retries: int = 2) -> int:
        sub = JobSubmission(command="train", steps=steps, max_retries=retries)
        job_id = self.store.add_job(sub, self.clock(), default_retries=retries)
        job = self.store.job(job_id)
        assert job is not None
        self.sup.know(job)
        return job_id

    def request(self, job_id: int, node: int = 0) -> LeaseRequest:
        part = Assignment(job_id, node, (0,), 1000, 0, 0)
        entry = PlannedEntity((job_id,), "V100", (part,), False, (100.0,), (1.0,))
        return LeaseRequest(
            job_id=job_id,
            entry=entry,
            tag="1",
            round_idx=1,
            type_index=0,
            until_step=100.0,
            deadline=self.clock() + 60.0,
            measured=True,
            parts=((node, (0,), 1000),),
            env=(("EXTRA", "1"),),
        )

    def run(self, lease_id: str, steps: float) -> None:
        """The lease's process calls and reports ``steps``."""
        self.table.init(lease_id, 0, 4242)
        self.table.report(lease_id, 0, steps, steps / 10.0, False)

    def exit(self, lease_id: str, code: int | None = 0, lost: bool = False) -> None:
        self.executor.exits.append(ExitReport(lease_id, code, lost, "", "gone" if lost else ""))
        self.sup.tick(self.clock())

    def state(self, job_id: int) -> str:
        job = self.store.job(job_id)
        assert job is not None
        return job.state


def rig(tmp: Path, cluster: LiveCluster | None = None, **config: float) -> Rig:
    clock = FakeClock()
    store = Store(tmp / "state.db")
    table = LeaseTable(store, clock)
    executor = ScriptedExecutor()
    mechanism = Mechanism()
    live = cluster or discover([A], None)
    watcher = None if cluster is None else NodeWatcher(live, lambda: listing, every_s=1.0)
    sup = Supervisor(
        store,
        table,
        executor,
        live,
        DriverConfig(data_dir=str(tmp), **config),  # type: ignore[arg-type]
        mechanism,
        clock,
        nodes=watcher,
    )
    return Rig(store, table, executor, mechanism, clock, sup)


listing: list[RayNode] = [A, B]  # what the fake Ray lists (node tests set it)


def test_a_launch_writes_the_lease_and_hands_the_executor_its_spec(tmp_path: Path) -> None:
    r = rig(tmp_path)
    job = r.submit()
    lease_id = r.sup.launch(r.request(job), r.clock())
    spec = r.executor.launched[0]
    assert spec.lease_id == lease_id and spec.job_id == job
    assert dict(spec.env)["EXTRA"] == "1" and dict(spec.env)["GPUMOSAIC_LEASE_ID"] == lease_id
    assert r.table.get(lease_id) is not None and r.state(job) == "running"
    assert r.sup.lease_of == {job: lease_id} and r.mechanism.started == [lease_id]
    assert r.sup.counters.launches == 1


def test_a_second_launch_waits_until_the_previous_process_is_gone(tmp_path: Path) -> None:
    r = rig(tmp_path)
    job = r.submit()
    first = r.sup.launch(r.request(job), r.clock())
    r.run(first, 40.0)
    r.sup.stop(first)
    r.sup.request(r.request(job), r.clock())
    assert len(r.executor.launched) == 1 and job in r.sup.pending  # a job never runs twice
    r.exit(first)
    assert len(r.executor.launched) == 2 and not r.sup.pending
    assert r.sup.lease_of[job] != first


def test_an_exit_with_all_steps_done_ends_the_job_done(tmp_path: Path) -> None:
    r = rig(tmp_path)
    job = r.submit()
    lease = r.sup.launch(r.request(job), r.clock())
    r.run(lease, 100.0)
    r.exit(lease)
    assert r.state(job) == "done"
    assert r.mechanism.ended_leases == [lease] and r.mechanism.ended_jobs == [
        (job, Outcome.COMPLETED)
    ]
    assert r.sup.lease_of == {} and r.sup.durable[job] == 100.0


def test_failed_attempts_are_retried_then_the_job_fails(tmp_path: Path) -> None:
    r = rig(tmp_path)
    job = r.submit(retries=1)
    first = r.sup.launch(r.request(job), r.clock())
    r.run(first, 10.0)
    r.exit(first, code=1)
    assert r.state(job) == "queued" and r.sup.counters.retries == 1
    assert r.mechanism.ended_jobs == []
    second = r.sup.launch(r.request(job), r.clock())
    r.run(second, 10.0)
    r.exit(second, code=1)
    assert r.state(job) == "failed" and r.mechanism.ended_jobs == [(job, Outcome.FAILED)]


def test_a_lost_lease_requeues_its_job_without_an_attempt(tmp_path: Path) -> None:
    r = rig(tmp_path)
    job = r.submit()
    lease = r.sup.launch(r.request(job), r.clock())
    r.run(lease, 30.0)
    r.exit(lease, code=None, lost=True)
    row = r.store.job(job)
    assert row is not None and row.state == "queued" and row.attempts == 0
    assert r.sup.counters.lost == 1 and r.sup.counters.retries == 0


def test_a_cancelled_job_is_stopped_then_cancelled_once_gone(tmp_path: Path) -> None:
    r = rig(tmp_path)
    running, waiting = r.submit(), r.submit()
    lease = r.sup.launch(r.request(running), r.clock())
    r.run(lease, 20.0)
    r.store.request_cancel(running, r.clock())
    r.store.request_cancel(waiting, r.clock())
    r.sup.tick(r.clock())
    assert r.executor.stopped == [lease] and r.state(running) == "running"
    assert r.state(waiting) == "cancelled"
    r.exit(lease)
    assert r.state(running) == "cancelled"
    assert sorted(r.mechanism.ended_jobs) == [
        (running, Outcome.CANCELLED),
        (waiting, Outcome.CANCELLED),
    ]


def test_recover_ends_the_previous_runs_leases_at_their_checkpoints(tmp_path: Path) -> None:
    r = rig(tmp_path)
    job = r.submit()
    lease = r.sup.launch(r.request(job), r.clock())
    r.run(lease, 50.0)
    r.table.checkpoint(lease, 0, 40.0)
    # The service dies; a new supervisor takes the state file over.
    again = Supervisor(
        r.store, LeaseTable(r.store, r.clock), r.executor, discover([A], None),
        DriverConfig(data_dir=str(tmp_path)), r.mechanism, r.clock,
    )  # fmt: skip
    stale = again.recover(r.clock())
    assert [s.id for s in stale] == [lease] and r.executor.reaped == [lease]
    row = r.store.job(job)
    assert row is not None and row.state == "queued" and row.steps_done == 40.0


def test_a_silent_lease_is_stopped_as_a_failed_attempt(tmp_path: Path) -> None:
    r = rig(tmp_path, start_grace_s=30.0, report_grace_s=10.0)
    quiet, talking = r.submit(), r.submit()
    quiet_lease = r.sup.launch(r.request(quiet), r.clock())
    talking_lease = r.sup.launch(r.request(talking, node=0), r.clock())
    r.run(talking_lease, 5.0)
    r.clock.t += 29.0
    r.table.report(talking_lease, 0, 6.0, 1.0, False)
    r.sup.tick(r.clock())
    assert r.executor.stopped == []  # within its start grace
    r.clock.t += 2.0
    r.sup.tick(r.clock())
    assert r.executor.stopped == [quiet_lease] and r.sup.counters.silent_stops == 1
    r.exit(quiet_lease)
    row = r.store.job(quiet)
    assert row is not None and row.attempts == 1 and "no lease call within 30 s" in row.reason
    r.clock.t += 11.0  # the other one stopped reporting 11 s ago
    r.sup.tick(r.clock())
    assert r.executor.stopped == [quiet_lease, talking_lease]


def test_a_lost_node_stops_its_leases_and_drops_its_launches(tmp_path: Path) -> None:
    global listing
    listing = [A, B]
    r = rig(tmp_path, cluster=discover([A, B], None))
    on_a, on_b, moving = r.submit(), r.submit(), r.submit()
    lease_a = r.sup.launch(r.request(on_a, node=0), r.clock())
    lease_b = r.sup.launch(r.request(on_b, node=1), r.clock())
    old = r.sup.launch(r.request(moving, node=0), r.clock())
    r.sup.stop(old)
    r.sup.request(r.request(moving, node=1), r.clock())  # waits for its old process
    assert moving in r.sup.pending
    listing = [A]
    r.clock.t += 1.0
    r.sup.tick(r.clock())
    assert r.mechanism.changes == [NodeEvent.LOST]
    assert not r.sup.pending  # the launch planned on the lost node is dropped
    assert r.executor.stopped == [old, lease_b] and lease_a not in r.sup.stopping
    listing = [A, RayNode("node-b2", B.ip, B.models)]
    r.clock.t += 1.0
    r.sup.tick(r.clock())
    assert r.mechanism.changes == [NodeEvent.LOST, NodeEvent.RETURNED]
    assert r.sup.cluster.slots[1].ray_node_id == "node-b2"  # launches go to the new id
