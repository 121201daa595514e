"""Gandiva (OSDI'18): affinity placement, suspend-resume time-slicing, introspective
packing and migration, as one simulator over the event engine and ClusterState.

Modules, by concept: ``simulator`` (the driver and its events), ``servers`` (who holds
which GPU sets on which server), ``group`` (one GPU set's time-slicing and progress),
``affinity`` (the affinity order, pure), ``ranking`` (a named placement inside a tier),
``rates`` (speeds, utilization, working sets), ``packing`` (whom to pack), ``migration``
(the defragmentation planner, pure), ``moves`` (migrations and spreading), ``counters``
(what happened, one value), ``records`` (the SimResult), ``config`` (the knobs).
"""

from gpumosaic.sim.gandiva.config import GandivaConfig, GandivaOptionError, parse_gandiva_options
from gpumosaic.sim.gandiva.simulator import GandivaSimulator, run_gandiva, simulate_gandiva

__all__ = [
    "GandivaConfig",
    "GandivaOptionError",
    "GandivaSimulator",
    "parse_gandiva_options",
    "run_gandiva",
    "simulate_gandiva",
]
