"""Where a run's CPU goes, against its floor: the part no change of ours can remove (the
LP solves at Clarabel's own speed on the same problems, Python's and numpy's start) and
the part that is ours (imports, data, the loop, placement, building the LPs).

    PYTHONPATH=src python bench/floor.py fill     # openb FGD fill, seed 42, inflate 1.3
    PYTHONPATH=src python bench/floor.py gavel    # Gavel's 36:36:36 run (bench_rounds.py's)
    PYTHONPATH=src python bench/floor.py openb    # the Alibaba-scale run, FGD, 860 jobs/h

Prints one JSON object of CPU seconds (user + system of this process): ``start`` (the
interpreter, numpy; measured before anything of gpumosaic is imported), ``imports``,
``data``, ``run`` and within it ``solver`` (inside Clarabel: its set-up and solve), and
``whole`` (everything, as ``/usr/bin/time`` counts it); ``ours`` = whole - start - solver.
Round runs add the run's own wall-clock split: ``policy_wall_s`` (the policy: building
the LPs, Clarabel, the repair) and ``placement_wall_s`` (leases: releases, placement).
"""

from __future__ import annotations

import resource
import sys
import time


def cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    import json

    import numpy  # noqa: F401  # part of the floor: every run imports it

    what = sys.argv[1] if len(sys.argv) > 1 else "fill"
    marks = {"start": cpu()}
    solver = [0.0, 0]
    parts: dict[str, float] = {}
    if what == "fill":
        from gpumosaic.run.fill import fill_replay
        from gpumosaic.traces.openb import load_openb_nodes, load_openb_tasks

        marks["imports"] = cpu()
        nodes, tasks = load_openb_nodes("openb:gpu"), load_openb_tasks("openb:default")
        marks["data"] = cpu()
        fill_replay(nodes, tasks, "fgd", 42, 1.3)
    else:
        from gpumosaic.run.rounds import round_simulator

        _time_the_solver(solver)
        marks["imports"] = cpu()
        cluster, workload = _round_inputs(what)
        marks["data"] = cpu()
        placement = "strided" if what == "gavel" else "fgd"
        result = round_simulator(cluster, workload, "max_min_fairness_perf", placement, 0).run()
        assert result.leases is not None
        parts = {"policy_wall_s": result.stats.policy_solve_s}
        parts["placement_wall_s"] = result.leases.placement_s
    marks["run"] = cpu()
    steps = list(marks.items())
    out = {name: round(t - (steps[i - 1][1] if i else 0.0), 3) for i, (name, t) in enumerate(steps)}
    out |= {"solver": round(solver[0], 3), "solves": solver[1], "whole": round(cpu(), 3)}
    out["ours"] = round(out["whole"] - out["start"] - out["solver"], 3)
    out |= {name: round(seconds, 3) for name, seconds in parts.items()}
    print(json.dumps({"what": what, **out}))


def _round_inputs(what: str) -> tuple[object, object]:
    if what == "gavel":
        from gpumosaic.experiments.reproductions.gavel import CONTINUOUS_CLUSTER
        from gpumosaic.model.cluster import ClusterSpec
        from gpumosaic.workloads.gavel_stream import gavel_stream_workload

        cluster = ClusterSpec.from_counts(CONTINUOUS_CLUSTER, gpus_per_node=1)
        return cluster, gavel_stream_workload(3.0, (4000, 5000), 0)
    from gpumosaic.experiments.reproductions.gavel_openb import openb_workload
    from gpumosaic.traces.openb import load_openb_nodes

    return load_openb_nodes("openb:gpu"), openb_workload(860, (4000, 5000), 0)


def _time_the_solver(total: list[float]) -> None:
    """Count the CPU inside Clarabel (its solver's set-up and its solve) into ``total``."""
    import clarabel

    real = clarabel.DefaultSolver

    class Timed:
        def __init__(self, *args: object) -> None:
            t = time.process_time()
            self.solver = real(*args)
            total[0] += time.process_time() - t

        def solve(self) -> object:
            t = time.process_time()
            solution = self.solver.solve()
            total[0] += time.process_time() - t
            total[1] += 1
            return solution

    clarabel.DefaultSolver = Timed


if __name__ == "__main__":
    main()
