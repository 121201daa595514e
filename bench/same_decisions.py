"""Hashes of every placement decision, to compare two commits ("same decisions").

    PYTHONPATH=src python bench/same_decisions.py fill > after.json
    PYTHONPATH=/tmp/before/src python bench/same_decisions.py fill > before.json
    diff before.json after.json

``fill``: for 11 placements x seeds 42, 43 on the full openb trace (inflate 1.3), a hash
of every task's (index, node, GPU slots) and of the allocation, fragmentation, power and
failure arrays. ``rounds N P1:P2``: the openb round run (860 jobs/h, jobs 4000-5000,
seed 0) for its first N rounds with each placement, a hash of every round's plan
(entities, types, rows, steps, extensions, and each assignment's job, node, GPUs,
milli). ``gavel``: the same hash for every round of Gavel's 36:36:36 run (3.0 jobs/h, jobs
4000-5000, ``max_min_fairness_perf``, strided, seed 0). ``gandiva``: for the quick
Gandiva reproduction's 3 scenarios x 5 variants (seed 0), a hash of every decision (the
time and typed actions of each of the decider's steps) and of each job's start and
finish. Timings go to stderr.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import sys
import time

import numpy as np

from gpumosaic.traces.openb import load_openb_nodes

FILL_PLACEMENTS = (
    "random,dotprod,gpuclustering,gpupacking,bestfit,fgd,fgd-exact,pwr,firstfit,worstfit,"
    "pwr=200+fgd=800"
)


def fill_hashes() -> dict[str, str]:
    from gpumosaic.run.fill import fill_replay
    from gpumosaic.traces.openb import load_openb_tasks

    nodes = load_openb_nodes("openb:gpu")
    tasks = load_openb_tasks("openb:default")
    out = {}
    for placement in (p.replace("+", ",") for p in FILL_PLACEMENTS.split(",")):
        for seed in (42, 43):
            h = hashlib.sha256()

            def on_task(i: int, _job: object, a: object, h: hashlib._Hash = h) -> None:
                where = None if a is None else (a.node, a.gpus)  # type: ignore[attr-defined]
                h.update(repr((i, where)).encode())

            cpu = time.process_time()
            r = fill_replay(nodes, tasks, placement, seed, 1.3, on_task=on_task)
            for arr in (
                r.allocation_rate_pct,
                r.fragmentation_rate_pct,
                r.fragmentation_pct,
                r.power_gpu_w,
                r.power_cpu_w,
                r.fail_reason,
            ):
                h.update(np.ascontiguousarray(arr).tobytes())
            out[f"fill/{placement}/{seed}"] = h.hexdigest()[:16]
            print(placement, seed, f"{time.process_time() - cpu:.2f} s CPU", file=sys.stderr)
    return out


def round_hashes(rounds: int, placements: list[str]) -> dict[str, str]:
    from gpumosaic.experiments.reproductions.gavel_openb import openb_workload
    from gpumosaic.mechanisms.rounds.decision import RoundPlan
    from gpumosaic.run.rounds import round_simulator

    class _Stop(Exception):
        pass

    cluster = load_openb_nodes("openb:gpu")
    out = {}
    for placement in placements:
        h = hashlib.sha256()
        seen = [0]

        def on_plan(plan: RoundPlan, h: hashlib._Hash = h, seen: list[int] = seen) -> None:
            for arr in (plan.entity, plan.type_index, plan.rows_a, plan.rows_b):
                h.update(arr.tobytes())
            h.update(plan.steps_a.tobytes())
            h.update(plan.extended.tobytes())
            parts = [[(a.job_id, a.node, a.gpus, a.gpu_milli) for a in e] for e in plan.parts]
            h.update(repr(parts).encode())
            seen[0] += 1
            if seen[0] >= rounds:
                raise _Stop

        cpu = time.process_time()
        workload = openb_workload(860, (4000, 5000), 0)
        sim = round_simulator(
            cluster, workload, "max_min_fairness_perf", placement, 0, on_plan=on_plan
        )
        with contextlib.suppress(_Stop):
            sim.run()
        out[f"rounds/{placement}/{rounds}"] = h.hexdigest()[:16]
        print(placement, f"{time.process_time() - cpu:.1f} s CPU", file=sys.stderr)
    return out


def gavel_round_hashes() -> dict[str, str]:
    from gpumosaic.experiments.reproductions.gavel import CONTINUOUS_CLUSTER
    from gpumosaic.mechanisms.rounds.decision import RoundPlan
    from gpumosaic.model.cluster import ClusterSpec
    from gpumosaic.run.rounds import round_simulator
    from gpumosaic.workloads.gavel_stream import gavel_stream_workload

    h = hashlib.sha256()
    seen = [0]

    def on_plan(plan: RoundPlan) -> None:
        for arr in (plan.entity, plan.type_index, plan.rows_a, plan.rows_b, plan.steps_a):
            h.update(arr.tobytes())
        h.update(plan.extended.tobytes())
        parts = [[(a.job_id, a.node, a.gpus, a.gpu_milli) for a in e] for e in plan.parts]
        h.update(repr(parts).encode())
        seen[0] += 1

    cpu = time.process_time()
    cluster = ClusterSpec.from_counts(CONTINUOUS_CLUSTER, gpus_per_node=1)
    workload = gavel_stream_workload(3.0, (4000, 5000), 0)
    sim = round_simulator(cluster, workload, "max_min_fairness_perf", "strided", 0, on_plan=on_plan)
    sim.run()
    print(f"gavel {seen[0]} rounds, {time.process_time() - cpu:.1f} s CPU", file=sys.stderr)
    return {f"gavel/rounds/{seen[0]}": h.hexdigest()[:16]}


def gandiva_hashes() -> dict[str, str]:
    from gpumosaic.experiments.reproductions.gandiva import QUICK_SCENARIOS, VARIANTS, build
    from gpumosaic.mechanisms.gandiva import GandivaConfig, Step
    from gpumosaic.mechanisms.gandiva.sim import GandivaSimulator
    from gpumosaic.workloads.throughputs import GavelThroughputTable

    table = GavelThroughputTable.load()
    out = {}
    for scenario in QUICK_SCENARIOS:
        for variant in VARIANTS:
            h = hashlib.sha256()

            def on_step(now: float, step: Step, h: hashlib._Hash = h) -> None:
                h.update(repr((now, step.actions)).encode())

            cluster, workload = build(scenario, table, 0)
            config = GandivaConfig(
                packing=variant.packing,
                migration=variant.migration,
                time_slicing=variant.time_slicing,
            )
            cpu = time.process_time()
            result = GandivaSimulator(
                cluster, workload, config, np.random.default_rng(0), on_step=on_step
            ).run()
            for r in result.records:
                h.update(repr((r.job_id, r.start_s, r.finish_s)).encode())
            out[f"gandiva/{scenario.name}/{variant.name}"] = h.hexdigest()[:16]
            name = f"{scenario.name} / {variant.name}"
            print(name, f"{time.process_time() - cpu:.2f} s CPU", file=sys.stderr)
    return out


def main() -> None:
    what = sys.argv[1] if len(sys.argv) > 1 else "fill"
    if what == "fill":
        result = fill_hashes()
    elif what == "rounds":
        rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 60
        placements = (sys.argv[3] if len(sys.argv) > 3 else "fgd:strided").split(":")
        result = round_hashes(rounds, placements)
    elif what == "gavel":
        result = gavel_round_hashes()
    elif what == "gandiva":
        result = gandiva_hashes()
    else:
        raise SystemExit("usage: same_decisions.py fill | rounds N [P1:P2] | gavel | gandiva")
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
