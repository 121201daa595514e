"""``serve --mechanism gandiva``: the simulator's GandivaDecider driven by the wall-clock
driver, its actions executed as leases (in-process virtual jobs on a fake clock, the
service over HTTP, and real job processes on the session's Ray)."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import httpx
import numpy as np
import pytest

from gpumosaic.mechanisms.gandiva import GandivaConfig, GandivaDecider, Migrate
from gpumosaic.mechanisms.gandiva.live.driver import GandivaDriver
from gpumosaic.mechanisms.gandiva.live.throughputs import LiveThroughputs
from gpumosaic.policies.ordering import build_queue_order
from gpumosaic.runtime.cluster import LiveCluster, RayNode, discover
from gpumosaic.runtime.executors.contract import InProcessExecutor
from gpumosaic.runtime.jobs.submission import JobSubmission
from gpumosaic.runtime.leases import LeaseTable
from gpumosaic.runtime.state.records import GandivaJobRow
from gpumosaic.runtime.state.store import Store
from gpumosaic.runtime.supervisor.config import DriverConfig
from waiting import wait_for

PAIRS_WELL = "ResNet-18 (batch size 32)"  # Gavel's table: two of them pack with a gain
TABLE_RATE = 29.947  # its steps/s alone on a V100 in Gavel's table (and beside another)
TRAIN = (
    f"{sys.executable} {Path(__file__).parents[3] / 'runtime' / 'service' / 'jobs' / 'train.py'}"
)


def live_cluster(counts: str, nodes: int = 1) -> LiveCluster:
    """``nodes`` Ray nodes, each with ``counts`` GPUs."""
    models = tuple((m.split(":")[0].upper(), int(m.split(":")[1])) for m in counts.split(","))
    ray_nodes = [RayNode(f"node-{i}", f"127.0.0.{i + 1}", models) for i in range(nodes)]
    return discover(ray_nodes, None)


@dataclass
class FakeClock:
    t: float = 1_000.0

    def __call__(self) -> float:
        return self.t


@dataclass
class Bench:
    store: Store
    driver: GandivaDriver
    clock: FakeClock
    executor: InProcessExecutor
    overlaps: list[str]

    def submit(self, steps: float, job_type: str = "", gpus: int = 1) -> int:
        sub = JobSubmission(command="train", steps=steps, gpus=gpus, job_type=job_type)
        return self.store.add_job(sub, self.clock(), default_retries=2)

    def run(self, seconds: float, dt: float = 0.5, until_done: bool = True) -> None:
        for _ in range(int(seconds / dt)):
            self.clock.t += dt
            self.driver.tick(self.clock())
            self._check_running()
            if until_done and all(j.state == "done" for j in self.store.jobs()):
                return

    def _check_running(self) -> None:
        """No job has two processes, and no GPU runs two jobs unless they are packed."""
        procs = self.executor._procs
        jobs = [p.spec.job_id for p in procs.values()]
        if len(jobs) != len(set(jobs)):
            self.overlaps.append(f"a job runs twice at t={self.clock.t}: {jobs}")
        on_gpu: dict[tuple[int, int], list[int]] = {}
        for lease_id, proc in procs.items():
            if proc.stopping:  # checkpointing on its way out (the next unit waits for it)
                continue
            where = self.driver.where_of(lease_id)
            for g in where.gpus:
                on_gpu.setdefault((where.node, g), []).append(proc.spec.job_id)
        for gpu, ids in on_gpu.items():
            if len(ids) > 2 or (len(ids) == 2 and self.driver._partner(ids[0]) != ids[1]):
                self.overlaps.append(f"GPU {gpu} runs {ids} at t={self.clock.t}")

    def states(self) -> dict[int, str]:
        return {j.id: j.state for j in self.store.jobs()}


class SharingExecutor(InProcessExecutor):
    """Virtual jobs that step at ``alone`` steps/s on a GPU of their own and at
    ``beside`` while another job runs on their GPU (re-read at every poll)."""

    def __init__(self, table: LeaseTable, clock: FakeClock, alone: float, beside: float) -> None:
        super().__init__(table, clock, lambda job, model: alone)
        self.alone, self.beside = alone, beside

    def poll(self):  # type: ignore[no-untyped-def]
        users: dict[tuple[int, ...], int] = {}
        for proc in self._procs.values():
            key = proc.spec.ranks[0].devices
            users[key] = users.get(key, 0) + 1
        for proc in self._procs.values():
            proc.rate = self.beside if users[proc.spec.ranks[0].devices] > 1 else self.alone
        return super().poll()


def bench(
    tmp: Path,
    counts: str,
    config: GandivaConfig,
    rate_of: Callable[[int, str], float] = lambda job, model: 2.0,
    store: Store | None = None,
    clock: FakeClock | None = None,
    sharing: tuple[float, float] | None = None,
    nodes: int = 1,
) -> Bench:
    live = live_cluster(counts, nodes)
    clock = clock or FakeClock()
    store = store or Store(tmp / "state.db")
    table = LeaseTable(store, clock)
    executor = (
        InProcessExecutor(table, clock, rate_of)
        if sharing is None
        else SharingExecutor(table, clock, *sharing)
    )
    decider = GandivaDecider(
        live.spec,
        LiveThroughputs.load(),
        config,
        np.random.default_rng(0),
        order=build_queue_order("fifo"),
    )
    driver = GandivaDriver(
        store, table, executor, decider, live, DriverConfig(data_dir=str(tmp)), clock=clock
    )
    return Bench(store, driver, clock, executor, [])


SLICING = GandivaConfig(quantum_s=5.0, switch_s=0.5, packing=False, migration=False)


def test_more_jobs_than_gpus_are_time_sliced(tmp_path: Path) -> None:
    b = bench(tmp_path, "v100:2", SLICING)
    ids = [b.submit(30) for _ in range(4)]  # 15 s each alone at 2 steps/s
    b.driver.recover()
    b.run(200)
    assert b.states() == dict.fromkeys(ids, "done"), b.states()
    assert b.overlaps == []
    rows = {j: b.store.gandiva_job(j) for j in ids}
    assert all(r is not None for r in rows.values())
    assert sum(r.suspensions for r in rows.values() if r is not None) > 0
    assert b.driver.counters.suspensions > 0 and b.driver.counters.resumes > 0
    # A suspended job resumed from its checkpoint: it needed more than one lease, and its
    # steps went on from where the last one stopped (done exactly at its steps).
    for j in ids:
        row = rows[j]
        if row is not None and row.suspensions > 0:
            assert len(b.store.leases(j)) >= 2
        job = b.store.job(j)
        assert job is not None and job.steps_done == 30
    # Time slicing shared the GPUs: all four ran before any finished.
    first_finish = min(job.finished_at for job in b.store.jobs() if job.finished_at is not None)
    assert all(
        job.started_at is not None and job.started_at < first_finish for job in b.store.jobs()
    )
    metrics = b.driver.metrics()
    assert metrics["gandiva_suspensions_total"] == b.driver.counters.suspensions > 0


PACKING = GandivaConfig(quantum_s=5.0, switch_s=0.5, profile_s=3.0, migration=False)


def test_a_packed_pair_runs_together_and_is_kept(tmp_path: Path) -> None:
    # Both step as fast packed as the table says they do alone: the pair gains 2.
    b = bench(tmp_path, "v100:1", PACKING, sharing=(TABLE_RATE, TABLE_RATE))
    host, guest = b.submit(600, PAIRS_WELL), b.submit(600, PAIRS_WELL)
    b.driver.recover()
    b.run(2, until_done=False)
    assert b.store.gandiva_job(host) is not None
    assert b.store.gandiva_job(host).packed_with == guest  # type: ignore[union-attr]
    assert b.store.gandiva_job(guest).packed_with == host  # type: ignore[union-attr]
    running = {p.spec.job_id for p in b.executor._procs.values()}
    assert running == {host, guest}  # both processes on the one GPU
    b.run(60)
    assert b.states() == {host: "done", guest: "done"}
    assert b.overlaps == []
    # Each ran at its own rate beside the other: the measured pair beats time slicing.
    assert b.driver.decider.counters.packs_kept == 1
    assert b.driver.decider.counters.packs_undone == 0
    assert b.driver.counters.observations > 0
    # Finished: nobody is packed any more.
    assert b.store.gandiva_job(host).packed_with is None  # type: ignore[union-attr]


def test_a_pair_that_hurts_is_undone_by_its_measured_rates(tmp_path: Path) -> None:
    # Beside each other both step at a third of their speed: the pair's measured gain is
    # 2/3, worse than time slicing, although the table predicts 2.
    b = bench(tmp_path, "v100:1", PACKING, sharing=(TABLE_RATE, TABLE_RATE / 3))
    host, guest = b.submit(300, PAIRS_WELL), b.submit(300, PAIRS_WELL)
    b.driver.recover()
    b.run(120)
    assert b.states() == {host: "done", guest: "done"}
    assert b.overlaps == []
    assert b.driver.decider.counters.packs_undone >= 1
    assert b.driver.counters.unpacks >= 1
    row = b.store.gandiva_job(guest)
    assert row is not None and row.suspensions >= 1
    assert any(e.kind == "unpacked" for e in b.store.events(guest))


def test_restart_on_a_state_file_keeps_counts_and_loses_no_job(tmp_path: Path) -> None:
    b = bench(tmp_path, "v100:1", SLICING)
    ids = [b.submit(30) for _ in range(2)]
    b.driver.recover()
    b.run(12, until_done=False)  # a quantum has passed: one suspension at least
    before = {j: b.store.gandiva_job(j) for j in ids}
    assert sum(r.suspensions for r in before.values() if r is not None) >= 1
    again = bench(tmp_path, "v100:1", SLICING, store=b.store, clock=b.clock)
    stale = again.driver.recover()
    assert len(stale) == 1  # the lease alive at the "crash"
    again.run(200)
    assert again.states() == dict.fromkeys(ids, "done")
    for j in ids:
        after = again.store.gandiva_job(j)
        old = before[j]
        assert after is not None
        assert after.suspensions >= (old.suspensions if old is not None else 0)


def test_cancel_a_suspended_and_a_running_job(tmp_path: Path) -> None:
    b = bench(tmp_path, "v100:1", SLICING)
    first, second = b.submit(1000), b.submit(1000)
    b.driver.recover()
    b.run(1, until_done=False)
    running = {p.spec.job_id for p in b.executor._procs.values()}
    assert running == {first}
    b.store.request_cancel(second, b.clock())
    b.store.request_cancel(first, b.clock())
    b.run(3, until_done=False)
    assert b.states() == {first: "cancelled", second: "cancelled"}
    assert not b.executor._procs
    assert not list(b.driver.decider.sets)


def test_a_state_file_from_before_gandiva_live_opens(tmp_path: Path) -> None:
    import sqlite3

    path = tmp_path / "old.db"
    store = Store(path)
    store.close()
    with sqlite3.connect(path) as db:  # a state file from before this table existed
        db.execute("DROP TABLE gandiva_jobs")
    again = Store(path)
    assert again.gandiva_job(1) is None
    job = again.add_job(JobSubmission(command="x", steps=1), 0.0, default_retries=0)
    again.save_gandiva_job(GandivaJobRow(job, 2, 1, None))
    assert again.gandiva_job(job) == GandivaJobRow(job, 2, 1, None)
    again.close()


def test_rounds_jobs_show_no_gandiva_fields() -> None:
    from gpumosaic.runtime.api.app import job_view

    store = Store(":memory:")
    job_id = store.add_job(JobSubmission(command="x", steps=1), 0.0, default_retries=0)
    job = store.job(job_id)
    assert job is not None
    shown = job_view(job, 0.0, None).model_dump()
    assert (shown["suspensions"], shown["migrations"], shown["packed_with"]) == (None,) * 3
    gandiva = job_view(job, 0.0, None, gandiva=GandivaJobRow(job_id, 3, 1, 7)).model_dump()
    assert (gandiva["suspensions"], gandiva["migrations"], gandiva["packed_with"]) == (3, 1, 7)


@pytest.mark.slow
def test_service_shows_counts_in_jobs_json_and_metrics(tmp_path: Path) -> None:
    from gpumosaic.run.serve import ServeDescription, Service

    config = ServeDescription(
        state=str(tmp_path / "svc" / "state.db"),
        port=0,
        grace_s=0.5,
        mechanism="gandiva:quantum=1,switch=0.1,profile=0.5,migration=off",
    )
    service = Service(
        config,
        live_cluster("v100:1"),
        executor_factory=lambda table: InProcessExecutor(table, time.time, lambda j, m: 20.0),
    )
    service.start()
    try:
        with httpx.Client(base_url=service.url, timeout=60) as client:
            plain = [client.post("/v1/jobs", json={"command": "x", "steps": 40}) for _ in range(2)]
            packed = [
                client.post("/v1/jobs", json={"command": "x", "steps": 40, "job_type": PAIRS_WELL})
                for _ in range(2)
            ]
            assert all(r.status_code in (200, 201) for r in plain + packed), plain[0].text
            jobs = wait_for(
                lambda: client.get("/v1/jobs").json(),
                120,
                "the four jobs to be done",
                until=lambda jobs: all(j["state"] == "done" for j in jobs),
            )
            assert all(j["suspensions"] is not None for j in jobs)
            assert sum(j["suspensions"] for j in jobs) > 0
            text = client.get("/metrics").text
            assert "gpumosaic_gandiva_suspensions_total" in text
            assert "gpumosaic_gandiva_decided_packs_tried_total" in text
    finally:
        service.stop()
    assert service.driver is None and service.gandiva_driver is not None
    assert service.gandiva_driver.counters.packs >= 1


def test_a_bad_mechanism_names_the_flag() -> None:
    from gpumosaic.errors import InputError
    from gpumosaic.run.serve import ServeDescription

    for bad in ("tiresias", "gandiva:quantum=-1", "gandiva:nonsense=1"):
        with pytest.raises(InputError) as err:
            ServeDescription(mechanism=bad)
        assert "--mechanism" in str(err.value)


def test_a_waiting_job_migrates_to_a_gpu_that_frees_up(tmp_path: Path) -> None:
    config = GandivaConfig(quantum_s=30.0, switch_s=0.5, packing=False, migration=True)
    b = bench(tmp_path, "v100:2", config)
    moves: list[Migrate] = []
    b.driver.on_step = lambda t, step: moves.extend(
        a for a in step.actions if isinstance(a, Migrate)
    )
    long_a, short, long_c = b.submit(200), b.submit(10), b.submit(200)
    b.driver.recover()
    b.run(3, until_done=False)
    waiting = {long_a, short, long_c} - {p.spec.job_id for p in b.executor._procs.values()}
    assert len(waiting) == 1  # three jobs, two GPUs: one waits for its turn
    b.run(300)
    assert b.states() == dict.fromkeys([long_a, short, long_c], "done")
    assert b.overlaps == []
    assert moves, "the waiting job should move onto the GPU the short job freed"
    moved = moves[0].job_id
    assert moved != short
    assert b.driver.counters.migrations == len(moves)
    # The moved job's next lease is on the GPU set the move named, from its checkpoint.
    leases = sorted(b.store.leases(moved), key=lambda x: x.started_at)
    assert any(lease.parts[0][1] == moves[0].gpus for lease in leases)
    assert any(e.kind == "migrated" for e in b.store.events(moved))


def test_a_crash_right_after_a_migration_loses_no_job_and_runs_none_twice(
    tmp_path: Path,
) -> None:
    # serve killed (no shutdown: the driver object is dropped) in the tick that executed
    # a migration (the moved job's lease on its new GPU); a new service on the same state
    # file finds the stale leases, and every job ends done from its checkpoints, never
    # behind what was checkpointed and never twice at once.
    config = GandivaConfig(quantum_s=30.0, switch_s=0.5, packing=False, migration=True)
    b = bench(tmp_path, "v100:2", config)
    moves: list[Migrate] = []
    b.driver.on_step = lambda t, step: moves.extend(
        a for a in step.actions if isinstance(a, Migrate)
    )
    ids = [b.submit(200), b.submit(10), b.submit(200)]
    b.driver.recover()
    for _ in range(600):
        b.run(0.5, until_done=False)
        if moves:
            break
    assert moves, "no migration was decided"
    moved = moves[0].job_id
    kept = {j.id: j.checkpoint_steps for j in b.store.jobs()}
    assert b.overlaps == []
    again = bench(tmp_path, "v100:2", config, store=b.store, clock=b.clock)
    stale = again.driver.recover()
    assert stale, "the leases alive at the crash are found"
    again.run(400)
    assert again.states() == dict.fromkeys(ids, "done")
    assert again.overlaps == []
    for job in again.store.jobs():
        assert job.steps_done >= kept[job.id]  # no checkpoint lost
    assert any(e.kind == "migrated" for e in again.store.events(moved))


def test_a_crash_while_a_job_is_suspended_keeps_its_checkpoint(tmp_path: Path) -> None:
    # Killed while a suspended job's process checkpoints on its way out (Gandiva's
    # suspend is checkpoint-and-exit here): the restarted service resumes it from the
    # checkpoint it had, and nothing runs twice.
    b = bench(tmp_path, "v100:1", SLICING)
    ids = [b.submit(60) for _ in range(2)]
    b.driver.recover()

    def suspending() -> list[int]:  # jobs whose process is on its way out, checkpointed
        out = [p.spec.job_id for p in b.executor._procs.values() if p.stopping]
        return [j for j in out if (row := b.store.job(j)) is not None and row.checkpoint_steps]

    for _ in range(400):
        b.run(0.5, until_done=False)
        if suspending():
            break
    assert suspending(), "no suspension of a job with a checkpoint began"
    kept = {j.id: j.checkpoint_steps for j in b.store.jobs()}
    again = bench(tmp_path, "v100:1", SLICING, store=b.store, clock=b.clock)
    assert again.driver.recover()
    again.run(400)
    assert again.states() == dict.fromkeys(ids, "done")
    assert b.overlaps == [] and again.overlaps == []
    for job in again.store.jobs():
        assert job.steps_done >= kept[job.id]


@pytest.mark.slow
def test_real_jobs_on_ray_are_time_sliced_from_their_checkpoints(
    ray_cluster: object, tmp_path: Path
) -> None:
    from gpumosaic.run.serve import ServeDescription, Service, connect_ray

    config = ServeDescription(
        state=str(tmp_path / "ray" / "state.db"),
        port=0,
        grace_s=2.0,
        start_timeout_s=30.0,
        cluster="v100:1",
        mechanism="gandiva:quantum=2,switch=0.1,packing=off,migration=off",
    )
    service = Service(config, connect_ray(config))
    service.start()
    try:
        with httpx.Client(base_url=service.url, timeout=60) as client:
            # 3 s of steps each against 2 s quanta: each job is suspended at least once
            # and resumes from its checkpoint (a longer job only adds quanta, not checks).
            body = {"command": TRAIN, "steps": 75, "env": {"STEP_S": "0.04"}}
            ids = [client.post("/v1/jobs", json=body).json()["id"] for _ in range(2)]
            jobs = wait_for(
                lambda: client.get("/v1/jobs").json(),
                300,
                "the two jobs to end",
                until=lambda jobs: all(j["state"] in ("done", "failed") for j in jobs),
            )
            assert [j["state"] for j in jobs] == ["done", "done"], jobs
            assert sum(j["suspensions"] for j in jobs) > 0, jobs
    finally:
        service.stop()
    logs = [(tmp_path / "ray" / "logs" / f"job-{j}.log").read_text() for j in ids]
    assert not any("TWICE" in log for log in logs)  # never two processes of one job
    starts = [
        int(line.rsplit("from=", 1)[1])
        for log in logs
        for line in log.splitlines()
        if line.startswith("start pid=")
    ]
    # Each job started at least once; a suspended one came back from its checkpoint.
    assert len(starts) > len(ids)
    assert any(step > 0 for step in starts)


@pytest.mark.slow
def test_real_jobs_on_ray_are_packed_on_one_gpu(ray_cluster: object, tmp_path: Path) -> None:
    from gpumosaic.run.serve import ServeDescription, Service, connect_ray

    config = ServeDescription(
        state=str(tmp_path / "pack" / "state.db"),
        port=0,
        grace_s=2.0,
        start_timeout_s=30.0,
        cluster="v100:1",
        mechanism="gandiva:quantum=30,switch=0.1,profile=1,migration=off",
    )
    service = Service(config, connect_ray(config))
    service.start()
    seen_packed: set[tuple[int, int]] = set()
    try:
        with httpx.Client(base_url=service.url, timeout=60) as client:
            # Sleeping steps: each job steps as fast beside the other as alone.
            body = {"command": TRAIN, "steps": 150, "env": {"STEP_S": "0.02"}}
            body["job_type"] = PAIRS_WELL
            ids = [client.post("/v1/jobs", json=body).json()["id"] for _ in range(2)]

            def observe() -> list[dict]:
                jobs = client.get("/v1/jobs").json()
                seen_packed.update((j["id"], j["packed_with"]) for j in jobs if j["packed_with"])
                return jobs

            jobs = wait_for(
                observe,
                300,
                "the packed pair to end",
                until=lambda jobs: all(j["state"] in ("done", "failed") for j in jobs),
            )
            assert [j["state"] for j in jobs] == ["done", "done"], jobs
            metrics = client.get("/metrics").text
    finally:
        service.stop()
    assert seen_packed == {(ids[0], ids[1]), (ids[1], ids[0])}
    assert "gpumosaic_gandiva_packs_total 1" in metrics
    assert "gpumosaic_gandiva_decided_packs_kept_total 1" in metrics
    assert "gpumosaic_gandiva_observations_total 0" not in metrics  # rates were measured
    logs = [(tmp_path / "pack" / "logs" / f"job-{j}.log").read_text() for j in ids]
    assert not any("TWICE" in log for log in logs)


def test_hand_over_times_are_measured_from_the_decisions(tmp_path: Path) -> None:
    b = bench(tmp_path, "v100:2", SLICING)
    ids = [b.submit(30) for _ in range(4)]
    b.driver.recover()
    b.run(200)
    assert b.states() == dict.fromkeys(ids, "done")
    times = b.driver.times
    # Two first starts onto free GPUs, and a hand-over for every resume executed (from
    # the decision to the job's first lease call, in the service's clock).
    assert len(times.start) == 2
    assert len(times.switch) == b.driver.counters.resumes > 0
    assert all(0.0 <= t < 5.0 for t in times.start + times.switch)
    assert times.migration == [] and times.pack == []


def test_each_process_is_told_the_job_type_beside_it(tmp_path: Path) -> None:
    from gpumosaic.mechanisms.gandiva.live.emulate import ENV_PARTNER_FILE

    b = bench(tmp_path, "v100:1", PACKING, sharing=(TABLE_RATE, TABLE_RATE))
    host, guest = b.submit(600, PAIRS_WELL), b.submit(600, "ResNet-18 (batch size 64)")
    b.driver.recover()
    b.run(2, until_done=False)
    assert b.store.gandiva_job(host).packed_with == guest  # type: ignore[union-attr]
    files = {p.spec.job_id: dict(p.spec.env)[ENV_PARTNER_FILE] for p in b.executor._procs.values()}
    assert Path(files[host]).read_text().strip() == "ResNet-18 (batch size 64)"
    assert Path(files[guest]).read_text().strip() == PAIRS_WELL
    # Packable one-GPU jobs are launched as half-GPU shares (--sharing runs them shared).
    assert {p.spec.gpu_milli for p in b.executor._procs.values()} == {500}


def test_the_emulated_pair_rate_is_the_simulators() -> None:
    from gpumosaic.mechanisms.gandiva.live.emulate import pair_rates
    from gpumosaic.workloads.throughputs import GavelThroughputTable

    other = "ResNet-50 (batch size 64)"  # beside it, ResNet-18 runs at half its speed
    rates = pair_rates(PAIRS_WELL, "v100", 1.0)
    packed = GavelThroughputTable.load().packed(PAIRS_WELL, 1, other, 1, "v100")
    assert packed is not None
    assert rates[other] == pytest.approx(packed[0])
    assert rates[other] < GavelThroughputTable.load().isolated(PAIRS_WELL, 1, "v100")
