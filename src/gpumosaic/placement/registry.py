"""The one registry of placement strategies, by name.

``build_placement("fgd", workload)``; names are case-insensitive and ignore ``-``/``_``
(``best-fit`` = ``bestfit``). Weighted combinations: ``"pwr=200,fgd=800"`` is the weighted
sum of the members' normalized scores; the GPU choice is that of the highest weight.
A single name is a combination of one member with weight 1000.
"""

from __future__ import annotations

from collections.abc import Callable

from gpumosaic.errors import InputError, unknown_name
from gpumosaic.placement.base import PlacementStrategy
from gpumosaic.placement.scorers import (
    BestFitScorer,
    DotProdScorer,
    FgdScorer,
    FirstFitScorer,
    GpuClusteringScorer,
    GpuPackingScorer,
    Member,
    PwrScorer,
    RandomPlacement,
    ScoredPlacement,
    Scorer,
    WorstFitScorer,
)
from gpumosaic.placement.workload import TargetWorkload

SINGLE_WEIGHT = 1000.0


def _needs_workload(workload: TargetWorkload | None, name: str) -> TargetWorkload:
    if workload is None:
        raise InputError(f"placement {name!r} needs the target workload (the task list)")
    return workload


SCORERS: dict[str, Callable[[TargetWorkload | None], Scorer]] = {
    "dotprod": lambda _: DotProdScorer(),
    "gpuclustering": lambda _: GpuClusteringScorer(),
    "gpupacking": lambda _: GpuPackingScorer(),
    "bestfit": lambda _: BestFitScorer(),
    "fgd": lambda w: FgdScorer(_needs_workload(w, "fgd")),
    "fgdexact": lambda w: FgdScorer(_needs_workload(w, "fgd-exact"), exact=True),
    "pwr": lambda _: PwrScorer(),
    "firstfit": lambda _: FirstFitScorer(),
    "worstfit": lambda _: WorstFitScorer(),
}
ALIASES = {"strided": "worstfit"}
UNWEIGHTED = ("random",)


def canonical_name(name: str) -> str:
    """``Best-Fit`` -> ``bestfit``; aliases resolved."""
    key = name.strip().lower().replace("-", "").replace("_", "")
    return ALIASES.get(key, key)


def placement_names() -> tuple[str, ...]:
    return (*UNWEIGHTED, *SCORERS, *ALIASES)


def build_placement(spec: str, workload: TargetWorkload | None) -> PlacementStrategy:
    """A fresh strategy for ``spec`` (one per run: strategies keep per-run caches)."""
    parts = [p for p in spec.split(",") if p.strip()]
    if not parts:
        raise InputError("empty placement", field="--placement")
    if len(parts) == 1 and "=" not in parts[0]:
        name = canonical_name(parts[0])
        if name == "random":
            return RandomPlacement()
        scorer = _scorer(name, workload)
        return ScoredPlacement(scorer.name, (Member(scorer, SINGLE_WEIGHT),))
    members: list[Member] = []
    labels: list[str] = []
    for part in parts:
        name_text, _, weight_text = part.partition("=")
        name = canonical_name(name_text)
        try:
            weight = float(weight_text) if weight_text.strip() else SINGLE_WEIGHT
        except ValueError:
            raise InputError(
                f"weight of {name_text.strip()!r} is not a number", field="--placement"
            ) from None
        if not weight > 0:
            raise InputError(f"weight of {name_text.strip()!r} must be > 0", field="--placement")
        if name in UNWEIGHTED:
            raise InputError(f"{name!r} cannot be combined with weights", field="--placement")
        scorer = _scorer(name, workload)
        members.append(Member(scorer, weight))
        labels.append(f"{scorer.name}={weight:g}")
    return ScoredPlacement(",".join(labels), tuple(members))


def _scorer(name: str, workload: TargetWorkload | None) -> Scorer:
    factory = SCORERS.get(name)
    if factory is None:
        # Canonical names only; aliases (strided) and hyphens (best-fit) are accepted too.
        raise unknown_name("placement", name, (*UNWEIGHTED, *SCORERS), field="--placement")
    return factory(workload)
