"""The event simulator's old module path, kept for code that imports it:
``EventSimulator`` and ``simulate`` live in ``sim/event/simulator.py``."""

from gpumosaic.sim.event.simulator import EventSimulator, simulate

__all__ = ["EventSimulator", "simulate"]
