"""Gandiva (OSDI'18) simulated: the clock-free ``GandivaDecider``
(``mechanisms/gandiva``: affinity placement, suspend-resume time-slicing, introspective
packing and migration) driven by the event engine, with progress from modelled rates.

Modules: ``simulator`` (the driver: clock, arrivals, timers), ``progress`` (the modelled
progress and the GPU-seconds ledger, the decider's ``Meter``), ``records`` (the SimResult).
"""

from gpumosaic.mechanisms.gandiva.config import (
    GandivaConfig,
    GandivaOptionError,
    parse_gandiva_options,
)
from gpumosaic.mechanisms.gandiva.sim.simulator import (
    GandivaSimulator,
    run_gandiva,
    simulate_gandiva,
)

__all__ = [
    "GandivaConfig",
    "GandivaOptionError",
    "GandivaSimulator",
    "parse_gandiva_options",
    "run_gandiva",
    "simulate_gandiva",
]
