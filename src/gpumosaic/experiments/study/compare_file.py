"""The experiment file of a ``gpumosaic compare`` call, written beside its outputs so the
comparison reruns (and resumes, and gets a report) with ``gpumosaic run FILE``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import tomli_w

COMPARE_FILE = "experiment.toml"


def compare_experiment(
    *,
    mode: str,
    placements: list[str],
    policies: list[str] | None,
    seeds: list[int],
    cluster: str,
    workload: str,
    policy: str,
    rates: list[float],
    tasks: str,
    nodes: str,
    inflate: float,
    gpus_per_node: int,
    backfill: bool,
    sharing: list[str],
    mechanism: str,
    background: str | None = None,
) -> str:
    """The TOML text of the study a ``compare`` call runs."""
    grid: dict[str, Any]
    seed_axis: list[int] | str = seeds
    if len(seeds) > 2 and seeds == list(range(seeds[0], seeds[-1] + 1)):
        seed_axis = f"{seeds[0]}-{seeds[-1]}"  # a range as the user wrote it, not a list
    if mode == "fill":
        kind = "fill"
        grid = {"tasks": tasks, "nodes": nodes, "placement": placements, "seed": seed_axis,
                "inflate": inflate}  # fmt: skip
        what = f"fill replay: {', '.join(placements)}"
    elif policies is not None:
        # (the simulate kind imports the simulator: only for the sweeps that use it)
        from gpumosaic.experiments.study.kinds.simulate import LOAD_PLACEHOLDER

        kind = "simulate"
        template = _with_rate(workload, LOAD_PLACEHOLDER)
        grid = {"cluster": cluster, "workload": template, "policy": policies,
                "placement": placements[0], "seed": seed_axis, "gpus_per_node": gpus_per_node,
                "mechanism": "rounds", "load": rates}  # fmt: skip
        what = f"policies {', '.join(policies)} x rates {', '.join(f'{r:g}' for r in rates)}"
    else:
        kind = "simulate"
        grid = {"cluster": cluster, "workload": workload, "policy": policy,
                "placement": placements, "seed": seed_axis, "gpus_per_node": gpus_per_node,
                "mechanism": mechanism, "backfill": backfill, "sharing": sharing}  # fmt: skip
        if background is not None:  # the cluster pre-filled, as simulate --background
            grid["background"] = background
        what = f"{policy} with placements {', '.join(placements)}"
    document = {
        "experiment": {
            "name": "compare",
            "kind": kind,
            "description": f"written by gpumosaic compare: {what}",
        },
        "grid": grid,
    }
    header = "# Written by gpumosaic compare; rerun, resume and report it with\n"
    header += "#   gpumosaic run experiment.toml --out DIR && gpumosaic report DIR\n"
    return header + tomli_w.dumps(document)


def write_compare_experiment(out: Path, **options: Any) -> Path:
    path = out / COMPARE_FILE
    path.write_text(compare_experiment(**options))
    return path


def _with_rate(template: str, rate: str) -> str:
    kind, sep, rest = template.partition(":")
    args = ",".join(a for a in (rest, f"rate={rate}") if a)
    return f"{kind}:{args}" if sep else f"{template}:rate={rate}"
