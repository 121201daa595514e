"""The round decisions without a clock: a hand-written driver gets the simulator's leases.

The loop below is what a live driver does each round (admit arrived jobs, ask for a plan,
run each job its granted steps, report what ran), with progress "measured" as granted
steps at the planned rate. It must see the same plans, round by round, as ``run_rounds``.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from gpumosaic.mechanisms.rounds import RoundConfig, RoundDecider, RoundPlan, RoundReport
from gpumosaic.mechanisms.rounds.sim import RoundSimulator
from gpumosaic.placement.registry import build_placement
from gpumosaic.placement.workload import TargetWorkload
from gpumosaic.policies.registry import build_policy
from gpumosaic.run.parts import build_allocation_policy, build_placement_for
from gpumosaic.workloads.spec import parse_cluster, parse_workload
from gpumosaic.workloads.workload import Workload

Lease = tuple[
    float, tuple[tuple[int, ...], str, tuple[tuple[int, tuple[int, ...], int], ...], bool]
]


def leases(plan: RoundPlan) -> list[Lease]:
    """Per entity: (round start, (job ids, GPU type, (node, GPUs, milli) parts, extended))."""
    return [
        (
            plan.now_s,
            (
                e.job_ids,
                e.gpu_type,
                tuple((p.node, p.gpus, p.gpu_milli) for p in e.parts),
                e.extended,
            ),
        )
        for e in plan.entries
    ]


def hand_driven(workload: Workload, cluster_spec: str, policy: str, seed: int) -> list[Lease]:
    cluster = parse_cluster(cluster_spec, gpus_per_node=2)
    target = TargetWorkload.from_jobs(workload.target_sample())
    shuffle_rng, place_rng = np.random.default_rng(seed).spawn(2)
    decider = RoundDecider(
        cluster,
        build_policy(policy),
        build_placement("fgd", target),
        workload.throughputs,
        RoundConfig(round_s=360.0),
        shuffle_rng,
        place_rng,
    )
    pending = list(workload.jobs)
    seen: list[Lease] = []
    now = pending[0].arrival_s
    for _ in range(10_000):  # bounded: the trace finishes in far fewer rounds
        while pending and pending[0].arrival_s <= now:
            job = pending.pop(0)
            rates = np.array([workload.throughputs.rate(job, m) for m in cluster.gpu_models])
            decider.admit(job, rates)
        if not pending and not decider.has_active_jobs:
            break
        plan = decider.plan(now)
        seen.extend(leases(plan))
        if not len(plan):
            assert pending, "jobs left that nothing will ever run"
            now = pending[0].arrival_s
            continue
        # "Measured" progress: every job did its granted steps at its planned rate.
        finish_a = now + plan.steps_a / plan.rate_a
        pair = plan.rows_b >= 0
        finish_b = np.where(pair, now + plan.steps_b / np.where(pair, plan.rate_b, 1.0), 0.0)
        finish = np.where(pair, np.maximum(finish_a, finish_b), finish_a)
        end = float(finish.max())
        decider.report(
            plan, RoundReport(end, finish - now, plan.steps_a, plan.steps_b, finish_a, finish_b)
        )
        now = end
    else:
        pytest.fail("the hand-driven loop did not finish")
    decider.release_all()
    assert not decider.has_active_jobs
    return seen


def simulated(workload: Workload, cluster_spec: str, policy: str, seed: int) -> list[Lease]:
    seen: list[Lease] = []
    rng = np.random.default_rng(seed)  # the run's Generator, as run/build.py makes it
    target = TargetWorkload.from_jobs(workload.target_sample())
    sim = RoundSimulator(
        parse_cluster(cluster_spec, gpus_per_node=2),
        workload,
        build_allocation_policy(policy, rng),
        build_placement_for("fgd", target),
        RoundConfig(round_s=360.0),
        on_plan=lambda plan: seen.extend(leases(plan)),
        rng=rng,
    )
    sim.run()
    return seen


@pytest.mark.parametrize(
    ("workload_spec", "policy"),
    [
        ("gavel:jobs=12,rate=20,milli=spatial", "max_min_fairness"),
        ("gavel:jobs=10,rate=0", "max_min_fairness_packed"),
    ],
)
def test_hand_driven_decider_matches_the_simulator_round_by_round(
    workload_spec: str, policy: str
) -> None:
    workload = parse_workload(workload_spec, seed=5).workload
    by_hand = hand_driven(workload, "v100:2,k80:2", policy, seed=5)
    by_sim = simulated(workload, "v100:2,k80:2", policy, seed=5)
    assert len(by_hand) > 10
    assert any(extended for _, (*_, extended) in by_hand), "no lease was ever extended"
    assert by_hand == by_sim


def test_plan_grants_gavel_steps_and_places_within_capacity() -> None:
    workload = parse_workload("gavel:jobs=6,rate=0,milli=spatial", seed=1).workload
    cluster = parse_cluster("v100:2", gpus_per_node=2)
    target = TargetWorkload.from_jobs(workload.target_sample())
    decider = RoundDecider(
        cluster,
        build_policy("max_min_fairness"),
        build_placement("fgd", target),
        workload.throughputs,
        RoundConfig(round_s=100.0),
        *np.random.default_rng(0).spawn(2),
    )
    for job in workload.jobs:
        decider.admit(job, np.array([workload.throughputs.rate(job, cluster.gpu_models[0])]))
    plan = decider.plan(0.0)
    assert len(plan) > 0
    # Gavel's lease: int(rate x round) steps, never more than what is left.
    expected = np.minimum(np.floor(plan.rate_a * 100.0), decider.jobs.total_steps[plan.rows_a])
    np.testing.assert_array_equal(plan.steps_a, expected)
    held = sum(p.gpu_milli * len(p.gpus) for e in plan.entries for p in e.parts)
    assert held == 2000 - int(decider.state.gpu_free.sum())
    assert not any(e.extended for e in plan.entries)  # nothing held before the first round


def test_admitting_a_batch_equals_admitting_one_by_one() -> None:
    """``admit_many`` keeps the job table, rejections and active order of ``admit``."""
    workload = parse_workload("gavel:jobs=40,rate=30,multigpu=on,milli=spatial", seed=2).workload
    cluster = parse_cluster("v100:2,k80:2", gpus_per_node=2)
    jobs = list(workload.jobs)
    jobs[3] = replace(jobs[3], num_gpu=0)  # asks for no GPU: rejected
    jobs[7] = replace(jobs[7], num_gpu=8, gpu_milli=1000, may_span_nodes=False)  # never fits
    jobs[9] = replace(jobs[9], slo_s=3600.0, priority_weight=2.0, entity="lab")
    rates = np.array([[workload.throughputs.rate(j, m) for m in cluster.gpu_models] for j in jobs])
    rates[11] = 0.0  # no throughput anywhere: rejected
    measured = [i % 3 != 0 for i in range(len(jobs))]

    def decider() -> RoundDecider:
        target = TargetWorkload.from_jobs(jobs)
        return RoundDecider(
            cluster,
            build_policy("max_min_fairness_perf"),
            build_placement("fgd", target),
            workload.throughputs,
            RoundConfig(),
            *np.random.default_rng(0).spawn(2),
        )

    one, batch = decider(), decider()
    rows_one = [one.admit(j, rates[i], measured[i]) for i, j in enumerate(jobs)]
    rows_batch = batch.admit_many(jobs[:10], rates[:10], measured[:10]).tolist()
    rows_batch += batch.admit_many(jobs[10:], rates[10:], measured[10:]).tolist()
    assert rows_one == rows_batch == list(range(len(jobs)))
    a, b = one.jobs, batch.jobs
    assert a.rejected == b.rejected and {3, 7, 11} <= set(a.rejected) < set(range(len(jobs)))
    assert a.active_rows == b.active_rows and a.measured == b.measured
    assert a.specs == b.specs and a.job_type == b.job_type and a.entity == b.entity
    for name in ("rates", "total_steps", "demand_milli", "job_id", "scale", "gpu_demand",
                 "priority_weight", "arrival_s", "slo_s", "is_active"):  # fmt: skip
        np.testing.assert_array_equal(getattr(a, name)[: len(jobs)], getattr(b, name)[: len(jobs)])
    assert b.gpu_demand[5] == jobs[5].gpu_demand and b.slo_s[9] == 3600.0
    assert one.need_solve and batch.need_solve
