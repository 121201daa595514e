"""The one registry of placement strategies, by name.

``build_placement("fgd", workload)``; names are case-insensitive and ignore ``-``/``_``
(``best-fit`` = ``bestfit``). Weighted combinations: ``"pwr=200,fgd=800"`` is the weighted
sum of the members' normalized scores; the GPU choice is that of the highest weight.
A single name is a combination of one member with weight 1000.

The grammar (``parse_placement``) and the name table are plain Python: a ``--placement``
is checked (a user mistake's one line) without importing a scorer or numpy. The scorer
classes load when a strategy is built, from the same parsed value.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from gpumosaic.errors import InputError, unknown_name

if TYPE_CHECKING:
    from gpumosaic.placement.base import PlacementStrategy
    from gpumosaic.placement.scorers import Scorer
    from gpumosaic.placement.workload import TargetWorkload

SINGLE_WEIGHT = 1000.0


@dataclass(frozen=True, slots=True)
class ScorerEntry:
    """A scorer by where its class lives (imported when a strategy is built)."""

    class_name: str  # in gpumosaic.placement.scorers
    needs_workload: bool = False  # scores against the target workload (FGD)
    options: tuple[tuple[str, Any], ...] = ()  # fixed keyword arguments of the variant


SCORERS: dict[str, ScorerEntry] = {
    "dotprod": ScorerEntry("DotProdScorer"),
    "gpuclustering": ScorerEntry("GpuClusteringScorer"),
    "gpupacking": ScorerEntry("GpuPackingScorer"),
    "bestfit": ScorerEntry("BestFitScorer"),
    "fgd": ScorerEntry("FgdScorer", needs_workload=True),
    "fgdexact": ScorerEntry("FgdScorer", needs_workload=True, options=(("exact", True),)),
    "pwr": ScorerEntry("PwrScorer"),
    "firstfit": ScorerEntry("FirstFitScorer"),
    "worstfit": ScorerEntry("WorstFitScorer"),
}
ALIASES = {"strided": "worstfit"}
UNWEIGHTED = ("random",)
# The names a user spells (in messages): the canonical ones, as the scorers name themselves.
_SPELLED = {"fgdexact": "fgd-exact"}


def canonical_name(name: str) -> str:
    """``Best-Fit`` -> ``bestfit``; aliases resolved."""
    key = name.strip().lower().replace("-", "").replace("_", "")
    return ALIASES.get(key, key)


def placement_names() -> tuple[str, ...]:
    return (*UNWEIGHTED, *SCORERS, *ALIASES)


# Weights are relative (each member's normalized score times its weight); a bound far
# beyond any meaningful ratio keeps the weighted sum finite (1e308 + 1e308 is inf).
MAX_WEIGHT = 1e6


@dataclass(frozen=True, slots=True)
class PlacementChoice:
    """A parsed ``--placement``: ``random``, or scorers (canonical names) with weights."""

    random: bool
    members: tuple[tuple[str, float], ...] = ()
    weighted: bool = False  # spelled as a combination (``name=weight,...``)


def parse_placement(spec: str) -> PlacementChoice:
    """``--placement``'s grammar: every name known, every weight a number in
    (0, ``MAX_WEIGHT``] (one
    ``InputError`` naming ``--placement`` otherwise). Imports no scorer."""
    parts = [p for p in spec.split(",") if p.strip()]
    if not parts:
        raise InputError("empty placement", field="--placement")
    if len(parts) == 1 and "=" not in parts[0]:
        name = canonical_name(parts[0])
        if name == "random":
            return PlacementChoice(random=True)
        _known(name)
        return PlacementChoice(random=False, members=((name, SINGLE_WEIGHT),))
    members: list[tuple[str, float]] = []
    for part in parts:
        name_text, _, weight_text = part.partition("=")
        name = canonical_name(name_text)
        try:
            weight = float(weight_text) if weight_text.strip() else SINGLE_WEIGHT
        except ValueError:
            raise InputError(
                f"weight of {name_text.strip()!r} is not a number", field="--placement"
            ) from None
        if not 0 < weight <= MAX_WEIGHT:  # NaN and inf fail here too
            raise InputError(
                f"weight of {name_text.strip()!r} must be a number > 0 and at most "
                f"{MAX_WEIGHT:g}, got {weight_text.strip()}",
                field="--placement",
            )
        if name in UNWEIGHTED:
            raise InputError(f"{name!r} cannot be combined with weights", field="--placement")
        _known(name)
        members.append((name, weight))
    return PlacementChoice(random=False, members=tuple(members), weighted=True)


def build_placement(spec: str, workload: TargetWorkload | None) -> PlacementStrategy:
    """A fresh strategy for ``spec`` (one per run: strategies keep per-run caches)."""
    from gpumosaic.placement.scorers import Member, RandomPlacement, ScoredPlacement

    choice = parse_placement(spec)
    if choice.random:
        return RandomPlacement()
    if not choice.weighted:
        ((name, weight),) = choice.members
        scorer = _scorer(name, workload)
        return ScoredPlacement(scorer.name, (Member(scorer, weight),))
    members: list[Member] = []
    labels: list[str] = []
    for name, weight in choice.members:
        scorer = _scorer(name, workload)
        members.append(Member(scorer, weight))
        labels.append(f"{scorer.name}={weight:g}")
    return ScoredPlacement(",".join(labels), tuple(members))


def _known(name: str) -> None:
    if name not in SCORERS:
        # Canonical names only; aliases (strided) and hyphens (best-fit) are accepted too.
        raise unknown_name("placement", name, (*UNWEIGHTED, *SCORERS), field="--placement")


def _scorer(name: str, workload: TargetWorkload | None) -> Scorer:
    entry = SCORERS[name]
    scorers = importlib.import_module("gpumosaic.placement.scorers")
    options = dict(entry.options)
    scorer_class: type[Scorer] = getattr(scorers, entry.class_name)
    if not entry.needs_workload:
        return scorer_class(**options)
    if workload is None:
        spelled = _SPELLED.get(name, name)
        raise InputError(f"placement {spelled!r} needs the target workload (the task list)")
    return scorer_class(workload, **options)  # type: ignore[call-arg]


_T = TypeVar("_T")


def check_placement_for(name: str, field: str = "--placement") -> PlacementChoice:
    """``name`` parsed by the placement grammar (the one ``build_placement_for`` builds
    from), refused as it would refuse it; imports no scorer and no numpy."""
    return naming(name, field, lambda: parse_placement(name))


def naming(name: str, field: str, make: Callable[[], _T]) -> _T:
    """``make()``, a placement's error as one ``InputError`` naming ``field`` and ``name``."""
    try:
        return make()
    except InputError as err:
        raise InputError(err.message, field=field, value=name) from None
    except ValueError as err:
        raise InputError(str(err), field=field, value=name) from None
