"""Packed pairs live (Gavel's space sharing): the emulated job's pair rate, the launch of
a pair's members, and the driver running a ``_packed`` plan with the in-process
executor (fake clock): both members on the same GPU, measured pair rates fed to the
next solve, never to the isolated estimates."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from builders import cluster, in_process

from gpumosaic.mechanisms.rounds.live.meter import RoundMeter
from gpumosaic.model.gpu import MILLI_PER_GPU
from gpumosaic.model.plan import PlannedEntity
from gpumosaic.model.state import Assignment
from gpumosaic.policies.packing_pairs import pair_rates_by_key
from gpumosaic.runtime.emulate import EmulationError, column_rate, rate_of, table_rate
from gpumosaic.runtime.executors.launch import launch_spec, table_column
from gpumosaic.runtime.leases import LiveLease
from gpumosaic.workloads.throughputs import GavelThroughputTable

RESNET = "ResNet-18 (batch size 64)"
A3C = "A3C"


def env_of(model: str, partner: str = "") -> dict[str, str]:
    column, factor = table_column(model)
    env = {"GPUMOSAIC_GPU_MODEL": model, "GPUMOSAIC_GPU_TABLE_COLUMN": f"{column}:{factor!r}"}
    if partner:
        env["GPUMOSAIC_PACKED_WITH"] = partner
    return env


@pytest.mark.parametrize("gpu", ["v100", "p100", "k80"])
def test_the_emulated_pair_rate_is_the_one_the_policy_plans_with(gpu: str) -> None:
    table = GavelThroughputTable.load()
    keys = [(RESNET, 1), (A3C, 1), (RESNET, 2), (A3C, 2)]
    planned = pair_rates_by_key(keys, table, [gpu])  # (K, K, T, 2)
    model = gpu.upper()
    for i, (a, sf) in enumerate(keys):
        for j, (b, sf_b) in enumerate(keys):
            if sf != sf_b or planned[i, j, 0, 0] <= 0:
                continue
            want = planned[i, j, 0, 0]
            got = rate_of(a, env_of(model, b), sf)  # the stdlib-only road
            assert got.steps_per_s == pytest.approx(want, rel=1e-12), (a, b, sf)
            assert got.packed_with == b
            assert table_rate(a, model, sf, b).steps_per_s == pytest.approx(want, rel=1e-12)
    # One GPU: exactly the measured number, both sides, found under either row.
    pair = table.packed(RESNET, 1, A3C, 1, gpu)
    assert pair is not None
    assert rate_of(RESNET, env_of(model, A3C), 1).steps_per_s == pair[0]
    assert rate_of(A3C, env_of(model, RESNET), 1).steps_per_s == pair[1]
    # Packed is slower than alone (the interference the table measured).
    assert (
        rate_of(A3C, env_of(model, RESNET), 1).steps_per_s
        < rate_of(A3C, env_of(model), 1).steps_per_s
    )


def test_an_unmeasured_pair_is_an_error_not_the_isolated_rate() -> None:
    with pytest.raises(EmulationError, match="no packed rate"):
        column_rate(RESNET, "v100", 1.0, 1, "V100", "no such job")
    with pytest.raises(EmulationError, match="no packed rate"):
        table_rate(RESNET, "V100", 1, "no such job")


def entry(job_ids: tuple[int, ...], milli: int = MILLI_PER_GPU) -> PlannedEntity:
    part = Assignment(job_id=-2, node=0, gpus=(1,), gpu_milli=milli, cpu_milli=0, memory_mib=0)
    return PlannedEntity(job_ids, "V100", (part,), False, (10.0,) * len(job_ids), (1.0,) * 2)


def test_a_pair_member_is_launched_on_the_pair_gpu_and_told_its_partner(tmp_path: Path) -> None:
    bench = in_process(tmp_path, counts="v100:2")
    a = bench.store.job(bench.submit(100, job_type=RESNET))
    b = bench.store.job(bench.submit(100, job_type=A3C))
    assert a is not None and b is not None
    live = cluster("v100:2")
    common = {
        "server_url": "http://127.0.0.1:1",
        "token": "",
        "checkpoint_dir": tmp_path / "c",
        "log_path": tmp_path / "l",
    }
    spec_a = launch_spec(a, entry((a.id, b.id)), "la", live, packed_with=b, **common)  # type: ignore[arg-type]
    spec_b = launch_spec(b, entry((a.id, b.id)), "lb", live, packed_with=a, **common)  # type: ignore[arg-type]
    alone = launch_spec(a, entry((a.id,)), "lc", live, **common)  # type: ignore[arg-type]
    env_a, env_b = dict(spec_a.env), dict(spec_b.env)
    assert env_a["GPUMOSAIC_PACKED_WITH"] == A3C and env_b["GPUMOSAIC_PACKED_WITH"] == RESNET
    assert env_a["GPUMOSAIC_PACKED_WITH_JOB"] == str(b.id)
    assert "GPUMOSAIC_PACKED_WITH" not in dict(alone.env)
    assert spec_a.ranks[0].devices == spec_b.ranks[0].devices == alone.ranks[0].devices
    # Ray's accounting: the pair holds the GPU whole, half each.
    assert spec_a.ranks[0].gpu_share + spec_b.ranks[0].gpu_share == 1.0
    assert alone.ranks[0].gpu_share == 1.0


def test_the_driver_runs_a_packed_plan_and_feeds_its_pair_rates(tmp_path: Path) -> None:
    # Alone each job steps at 10/s, packed at 3/s (job 1) and 4/s (job 2): the measured
    # pair rates (not the table's) are what the next solve's pair entity carries.
    bench = in_process(
        tmp_path, counts="v100:1", policy="max_min_fairness_packed", round_s=10.0,
        rate_of=lambda job, model: 10.0,
    )  # fmt: skip
    packed = {1: 3.0, 2: 4.0}
    bench.executor.pair_rate_of = lambda job, partner, model: packed[job]
    ids = [bench.submit(300, job_type=RESNET), bench.submit(300, job_type=A3C)]
    assert ids == [1, 2]
    driver = bench.driver
    seen_pair = False
    for _ in range(80):
        plan = bench.run_round(ticks=12, dt=1.0)
        pairs = [e for e in plan.entries if len(e.job_ids) == 2]
        for e in pairs:
            assert len(set(e.job_ids)) == 2  # a pair never runs a job twice
            running = {j: driver.lease_of.get(j) for j in e.job_ids}
            if all(running.values()):
                seen_pair = True
                assert driver.packed_with_of(1) == 2 and driver.packed_with_of(2) == 1
        if all(s == "done" for s in bench.states().values()):
            break
    assert bench.states() == {1: "done", 2: "done"}
    assert seen_pair and driver.counters.packed_launches >= 2
    assert driver.counters.pair_rate_samples > 0
    rows = {job: driver.row_of[job] for job in ids}
    decider = driver.decider
    # The fake executor steps in 1 s ticks: a lease whose grant ends mid-tick measures a
    # little less (which pair lease is the last depends on the rounds the policy planned).
    assert decider.pair_rates[(rows[1], rows[2], 0)] == pytest.approx(3.0, rel=0.02)
    assert decider.pair_rates[(rows[2], rows[1], 0)] == pytest.approx(4.0, rel=0.02)
    # The isolated estimates hold only rates measured alone (10/s; a short lease of the
    # fake executor, whose 1 s ticks overshoot its grant, measures somewhat less), never
    # a pair's (3/s, 4/s).
    for job in ids:
        iso = bench.store.throughputs(job).get("V100")
        assert iso is None or 5.0 < iso <= 10.0
    # No GPU over 1000 milli in any round: the members' leases hold half each.
    by_round: dict[tuple[int, int, int], int] = {}
    for lease in bench.store.leases():
        for r in range(lease.round, lease.round + lease.extensions + 1):
            for node, gpus, milli in lease.parts:
                for g in gpus:
                    key = (r, node, g)
                    by_round[key] = by_round.get(key, 0) + milli
    assert by_round and max(by_round.values()) <= MILLI_PER_GPU
    assert all(driver.packed_with_of(j) is None for j in ids)


def test_measured_pair_rates_replace_the_tables_in_the_next_solve(tmp_path: Path) -> None:
    bench = in_process(tmp_path, counts="v100:1", policy="max_min_fairness_packed")
    ids = [bench.submit(10_000, job_type=RESNET), bench.submit(10_000, job_type=A3C)]
    driver = bench.driver
    driver.boundary(bench.clock())
    decider = driver.decider
    ent = decider.book.entities
    assert ent is not None
    pair = np.flatnonzero(ent.rows_b >= 0)
    assert len(pair) == 1  # the table's pair is a candidate
    table = GavelThroughputTable.load().packed(RESNET, 1, A3C, 1, "v100")
    assert table is not None
    assert (ent.rate_a[pair[0], 0], ent.rate_b[pair[0], 0]) == pytest.approx(table)
    rows = [driver.row_of[j] for j in ids]
    decider.observe_pair_rate(rows[0], rows[1], 0, 7.5)
    assert not decider.need_solve  # Gavel: folded in, read by the next solve (arrivals, ...)
    decider.solve(1.0)
    ent = decider.book.entities
    assert ent is not None
    i = int(np.flatnonzero(ent.rows_b >= 0)[0])
    assert ent.rows_a[i] == rows[0]
    assert ent.rate_a[i, 0] == 7.5 and ent.rate_b[i, 0] == pytest.approx(table[1])
    # Its isolated rates stay the table's.
    assert decider.jobs.rates[rows[0], 0] == GavelThroughputTable.load().isolated(RESNET, 1, "v100")


def pair_lease(
    lease_id: str, job_id: int, steps: float, iter_s: float, finished_at: float | None
) -> LiveLease:
    return LiveLease(
        lease_id=lease_id, job_id=job_id, round_idx=1, gpu_type="V100", type_index=0,
        world_size=1, total_steps=1_000.0, until_step=1_000.0, deadline=1e9, launched_at=0.0,
        steps_at_launch=0.0, measured_grant=False, steps=steps, iter_s=iter_s, contacted=True,
        contacted_at=201.0, finished_at=finished_at,
    )  # fmt: skip


def test_the_meter_credits_a_pair_until_its_last_member_stops() -> None:
    # Job 1 finishes 20 s into the round (it stepped 19 s from its first call), its
    # partner steps on to the round's end (59 s): the pair ran 59 s (as the simulator
    # counts a pair, and Gavel takes the larger execution time), not 19 s; each member's
    # rate is a pair sample marked with its partner.
    meter = RoundMeter({"V100": 0})
    entry = PlannedEntity((1, 2), "V100", (), False, (40.0, 40.0), (2.0, 3.0))
    leases = {
        1: pair_lease("a", 1, 38.0, 19.0, finished_at=220.0),
        2: pair_lease("b", 2, 59.0, 59.0, None),
    }
    meter.lease_started(1, "a", 200.0, partner=2)
    meter.lease_started(2, "b", 200.0, partner=1)
    closed = meter.close(
        (entry,), 260.0, 100.0,
        steps_now=lambda job: leases[job].steps,
        live_lease=lambda job: (True, leases[job]),
        lease_by_id=lambda lease_id: leases[1 if lease_id == "a" else 2],
        demand_milli=lambda job: 1000,
    )  # fmt: skip
    np.testing.assert_array_equal(closed.report.ran_s, [59.0])
    np.testing.assert_array_equal(closed.report.finish_a, [120.0])  # 220 on the epoch 100
    assert sorted((s.job_id, s.partner, s.rate) for s in closed.rates) == [(1, 2, 2.0), (2, 1, 1.0)]
    assert meter.is_measured(1, 0, partner=2) and not meter.is_measured(1, 0)
