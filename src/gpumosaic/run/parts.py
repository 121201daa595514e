"""The road's decision objects from names, for every caller: the run's build
(``run/build.py``), ``serve`` and the Kubernetes extender. Light to import (no simulator,
no solver): the extender imports it at start-up.

- ``build_placement_for(name, target)``: a placement strategy scoring against a target
  workload; a bad name is one ``InputError`` naming the option;
- ``check_placement_for(name)``: the same refusal from the grammar alone (no scorer, no
  numpy: a user mistake's one line);
- ``build_allocation_policy(name, rng)``: a Gavel allocation policy drawing from the
  run's Generator (``check_allocation_policy(name)``: its refusal from the names alone);
- ``build_round_parts(...)``: the round mechanism's policy, placement, ``RoundConfig``
  and the decider's two Generators, spawned from the seed's root Generator exactly as
  ``mechanisms/rounds/sim`` spawns them for ``simulate --mechanism rounds``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from gpumosaic.errors import unknown_name
from gpumosaic.placement.registry import (
    build_placement,
)
from gpumosaic.placement.registry import (
    naming as _naming,
)

if TYPE_CHECKING:
    import numpy as np

    from gpumosaic.mechanisms.rounds.decision import RoundConfig
    from gpumosaic.placement.base import PlacementStrategy
    from gpumosaic.placement.workload import TargetWorkload
    from gpumosaic.policies.base import Policy

T = TypeVar("T")


def build_placement_for(
    name: str, target: TargetWorkload, field: str = "--placement"
) -> PlacementStrategy:
    """A placement strategy from its name (``fgd``, ``pwr=200,fgd=800``, ...) scoring
    against ``target``; a bad name is an ``InputError`` naming ``field``."""
    return _naming(name, field, lambda: build_placement(name, target))


def build_allocation_policy(name: str, rng: np.random.Generator, field: str = "--policy") -> Policy:
    """A Gavel allocation policy by name; one that draws at random draws from ``rng``."""
    from gpumosaic.policies.registry import build_policy

    check_allocation_policy(name, field)
    return build_policy(name, rng=rng)


def check_allocation_policy(name: str, field: str = "--policy") -> None:
    """``build_allocation_policy``'s refusal of a name, from the registry's names alone
    (no policy class, no solver, no numpy)."""
    from gpumosaic.policies.registry import POLICY_NAMES

    if name not in POLICY_NAMES:
        raise unknown_name("policy", name, POLICY_NAMES, field=field)


@dataclass(frozen=True, slots=True)
class RoundParts:
    """What a round driver (simulated or live) hands ``RoundDecider``."""

    policy: Policy
    placement: PlacementStrategy
    config: RoundConfig
    shuffle_rng: np.random.Generator  # the decider's GPU-type shuffle
    place_rng: np.random.Generator  # the placement's draws


def build_round_parts(
    policy: str,
    placement: str,
    target: TargetWorkload,
    seed: int,
    round_s: float,
    resolve_interval_s: float,
) -> RoundParts:
    """The round mechanism's decision objects from names: the policy drawing from the
    run's root Generator (``default_rng(seed)``), the decider's two streams spawned from
    it, as ``mechanisms/rounds/sim`` does for ``simulate --mechanism rounds``."""
    import numpy as np

    from gpumosaic.mechanisms.rounds.decision import RoundConfig

    rng = np.random.default_rng(seed)
    built = build_allocation_policy(policy, rng)
    strategy = build_placement_for(placement, target)
    shuffle_rng, place_rng = rng.spawn(2)
    config = RoundConfig(round_s, resolve_interval_s)
    return RoundParts(built, strategy, config, shuffle_rng, place_rng)
