"""Gandiva (OSDI'18) without a clock: ``GandivaDecider`` (see ``decider``).

Modules, by concept: ``decider`` (the calls a driver makes, and the scheduling pass),
``actions`` (what a driver executes), ``sets`` (who holds which GPU sets on which
server), ``group`` (one GPU set's time-slicing and pair trials), ``observations``
(measured rates, the input of introspection), ``affinity`` (the affinity order, pure),
``ranking`` (a named placement inside a tier), ``rates`` (the table's speeds,
utilization, working sets), ``packing`` (whom to pack), ``migration`` (the
defragmentation planner, pure), ``moves`` (migrations and spreading), ``counters``
(what happened, one value), ``config`` (the knobs).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpumosaic.lazy import lazy_names

if TYPE_CHECKING:
    from gpumosaic.mechanisms.gandiva.actions import (
        Action,
        Migrate,
        MoveReason,
        Pack,
        Reject,
        Resume,
        Start,
        StartGang,
        Suspend,
        Unpack,
    )
    from gpumosaic.mechanisms.gandiva.config import (
        GandivaConfig,
        GandivaOptionError,
        parse_gandiva_options,
    )
    from gpumosaic.mechanisms.gandiva.decider import GandivaDecider, Step
    from gpumosaic.mechanisms.gandiva.group import GandivaJob, GpuGroup, Meter

# The names load on first use (PEP 562): checking ``--sharing gandiva:...`` (``config``,
# plain Python) must not pay for the decider's numpy.
_WHERE = {
    **dict.fromkeys(
        (
            "Action",
            "Migrate",
            "MoveReason",
            "Pack",
            "Reject",
            "Resume",
            "Start",
            "StartGang",
            "Suspend",
            "Unpack",
        ),
        "actions",
    ),
    **dict.fromkeys(("GandivaConfig", "GandivaOptionError", "parse_gandiva_options"), "config"),
    **dict.fromkeys(("GandivaDecider", "Step"), "decider"),
    **dict.fromkeys(("GandivaJob", "GpuGroup", "Meter"), "group"),
}


__getattr__ = lazy_names(__name__, _WHERE)


__all__ = [
    "Action",
    "GandivaConfig",
    "GandivaDecider",
    "GandivaJob",
    "GandivaOptionError",
    "GpuGroup",
    "Meter",
    "Migrate",
    "MoveReason",
    "Pack",
    "Reject",
    "Resume",
    "Start",
    "StartGang",
    "Step",
    "Suspend",
    "Unpack",
    "parse_gandiva_options",
]
