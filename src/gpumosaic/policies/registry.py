"""Policy names (Gavel's, plus Tiresias/LAS) mapped to policy objects.

``build_policy(name, rng=None, **options)``: options are keyword arguments of the policy
class (e.g. ``backend="highs"``, ``thresholds_gpu_s=(3600.0, 36000.0)``,
``entity_policy="fifo"``); an unknown name or option raises ValueError naming it.
``rng`` is the run's ``numpy.random.Generator``: a policy class that draws random
choices takes it (its traits say ``random``); the others ignore it.
Stateful policies (``fifo``, ``fifo_perf``, ``fifo_packed``, ``gandiva`` and the
``finish_time_fairness`` family, whose ledger of isolated time spans calls) need one
object per simulation run: call ``build_policy`` once per run. Each policy module's
docstring states what it optimises in Gavel's terms.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import numpy as np

from gpumosaic.policies.base import Policy
from gpumosaic.policies.fifo import Fifo
from gpumosaic.policies.finish_time_fairness import FinishTimeFairness
from gpumosaic.policies.gandiva import Gandiva
from gpumosaic.policies.hierarchical import WaterFilling
from gpumosaic.policies.isolated import Isolated
from gpumosaic.policies.makespan import MinTotalDuration
from gpumosaic.policies.max_min_fairness import MaxMinFairness
from gpumosaic.policies.throughput import MaxSumThroughput
from gpumosaic.policies.tiresias import Tiresias

# name -> (factory, fixed keyword arguments that define the variant)
_VARIANTS: dict[str, tuple[Callable[..., Policy], dict[str, Any]]] = {
    "fifo": (Fifo, {"mode": "base"}),
    "fifo_perf": (Fifo, {"mode": "perf"}),
    "fifo_packed": (Fifo, {"mode": "packed"}),
    "max_min_fairness": (MaxMinFairness, {"heterogeneity_aware": False}),
    "max_min_fairness_perf": (MaxMinFairness, {}),
    "max_min_fairness_packed": (MaxMinFairness, {"use_pairs": True}),
    "max_min_fairness_water_filling": (WaterFilling, {"heterogeneity_aware": False}),
    "max_min_fairness_water_filling_perf": (WaterFilling, {}),
    "max_min_fairness_water_filling_packed": (WaterFilling, {"use_pairs": True}),
    "finish_time_fairness": (FinishTimeFairness, {"heterogeneity_aware": False}),
    "finish_time_fairness_perf": (FinishTimeFairness, {}),
    "finish_time_fairness_packed": (FinishTimeFairness, {"use_pairs": True}),
    "max_sum_throughput_perf": (MaxSumThroughput, {}),
    "max_sum_throughput_normalized_by_cost_perf": (MaxSumThroughput, {"normalize_by_cost": True}),
    "max_sum_throughput_normalized_by_cost_perf_SLOs": (
        MaxSumThroughput,
        {"normalize_by_cost": True, "use_slos": True},
    ),
    "max_sum_throughput_normalized_by_cost_packed_SLOs": (
        MaxSumThroughput,
        {"normalize_by_cost": True, "use_slos": True, "use_pairs": True},
    ),
    "min_total_duration": (MinTotalDuration, {"heterogeneity_aware": False}),
    "min_total_duration_perf": (MinTotalDuration, {}),
    "min_total_duration_packed": (MinTotalDuration, {"use_pairs": True}),
    "gandiva": (Gandiva, {}),
    "isolated": (Isolated, {}),
    "tiresias": (Tiresias, {}),
    "las": (Tiresias, {"name": "las"}),
}

POLICY_NAMES: tuple[str, ...] = tuple(_VARIANTS)


def build_policy(name: str, rng: np.random.Generator | None = None, **options: Any) -> Policy:
    """A fresh policy object for ``name`` with ``options`` (see the module docstring)."""
    try:
        factory, fixed = _VARIANTS[name]
    except KeyError:
        raise ValueError(f"unknown policy {name!r} (known: {', '.join(POLICY_NAMES)})") from None
    clash = set(options) & set(fixed)
    if clash:
        raise ValueError(f"policy {name!r} fixes option(s) {sorted(clash)}; pick another name")
    kwargs = {"name": name, **fixed, **options}
    if rng is not None and "rng" in inspect.signature(factory).parameters:
        kwargs["rng"] = rng
    try:
        return factory(**kwargs)
    except TypeError as err:
        raise ValueError(f"bad option for policy {name!r}: {err}") from None
