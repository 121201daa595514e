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

import importlib
import inspect
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    import numpy as np

    from gpumosaic.policies.base import Policy

# The policy classes, as (module under gpumosaic.policies, class): imported when a policy
# is built, so that the names alone (validating --policy: a user mistake's one line) load
# neither numpy nor a solver.
_FIFO = ("fifo", "Fifo")
_FTF = ("finish_time_fairness", "FinishTimeFairness")
_GANDIVA = ("gandiva", "Gandiva")
_WATER_FILLING = ("hierarchical", "WaterFilling")
_ISOLATED = ("isolated", "Isolated")
_MIN_TOTAL_DURATION = ("makespan", "MinTotalDuration")
_MAX_MIN_FAIRNESS = ("max_min_fairness", "MaxMinFairness")
_MAX_SUM_THROUGHPUT = ("throughput", "MaxSumThroughput")
_TIRESIAS = ("tiresias", "Tiresias")

# name -> (the policy class, fixed keyword arguments that define the variant)
_VARIANTS: dict[str, tuple[tuple[str, str], dict[str, Any]]] = {
    "fifo": (_FIFO, {"mode": "base"}),
    "fifo_perf": (_FIFO, {"mode": "perf"}),
    "fifo_packed": (_FIFO, {"mode": "packed"}),
    "max_min_fairness": (_MAX_MIN_FAIRNESS, {"heterogeneity_aware": False}),
    "max_min_fairness_perf": (_MAX_MIN_FAIRNESS, {}),
    "max_min_fairness_packed": (_MAX_MIN_FAIRNESS, {"use_pairs": True}),
    "max_min_fairness_water_filling": (_WATER_FILLING, {"heterogeneity_aware": False}),
    "max_min_fairness_water_filling_perf": (_WATER_FILLING, {}),
    "max_min_fairness_water_filling_packed": (_WATER_FILLING, {"use_pairs": True}),
    "finish_time_fairness": (_FTF, {"heterogeneity_aware": False}),
    "finish_time_fairness_perf": (_FTF, {}),
    "finish_time_fairness_packed": (_FTF, {"use_pairs": True}),
    "max_sum_throughput_perf": (_MAX_SUM_THROUGHPUT, {}),
    "max_sum_throughput_normalized_by_cost_perf": (
        _MAX_SUM_THROUGHPUT,
        {"normalize_by_cost": True},
    ),
    "max_sum_throughput_normalized_by_cost_perf_SLOs": (
        _MAX_SUM_THROUGHPUT,
        {"normalize_by_cost": True, "use_slos": True},
    ),
    "max_sum_throughput_normalized_by_cost_packed_SLOs": (
        _MAX_SUM_THROUGHPUT,
        {"normalize_by_cost": True, "use_slos": True, "use_pairs": True},
    ),
    "min_total_duration": (_MIN_TOTAL_DURATION, {"heterogeneity_aware": False}),
    "min_total_duration_perf": (_MIN_TOTAL_DURATION, {}),
    "min_total_duration_packed": (_MIN_TOTAL_DURATION, {"use_pairs": True}),
    "gandiva": (_GANDIVA, {}),
    "isolated": (_ISOLATED, {}),
    "tiresias": (_TIRESIAS, {}),
    "las": (_TIRESIAS, {"name": "las"}),
}

POLICY_NAMES: tuple[str, ...] = tuple(_VARIANTS)


def build_policy(name: str, rng: np.random.Generator | None = None, **options: Any) -> Policy:
    """A fresh policy object for ``name`` with ``options`` (see the module docstring)."""
    try:
        (module, class_name), fixed = _VARIANTS[name]
    except KeyError:
        raise ValueError(f"unknown policy {name!r} (known: {', '.join(POLICY_NAMES)})") from None
    clash = set(options) & set(fixed)
    if clash:
        raise ValueError(f"policy {name!r} fixes option(s) {sorted(clash)}; pick another name")
    factory = cast(
        "Callable[..., Policy]",
        getattr(importlib.import_module(f"gpumosaic.policies.{module}"), class_name),
    )
    kwargs = {"name": name, **fixed, **options}
    if rng is not None and "rng" in inspect.signature(factory).parameters:
        kwargs["rng"] = rng
    try:
        return factory(**kwargs)
    except TypeError as err:
        raise ValueError(f"bad option for policy {name!r}: {err}") from None
