"""The event simulator's old module path, kept for code that imports it:
``EventSimulator`` lives in ``sim/event/simulator.py``."""

from gpumosaic.sim.event.simulator import EventSimulator

__all__ = ["EventSimulator"]
