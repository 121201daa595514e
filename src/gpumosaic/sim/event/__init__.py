"""The event mechanism, simulated: ``simulator`` (event engine, arrivals, completions,
progress under sharing models, around the clock-free ``mechanisms.event.SchedulingPass``)
and ``tracker`` (cluster-wide figures kept current as nodes change)."""

from gpumosaic.sim.event.simulator import EventSimulator

__all__ = ["EventSimulator"]
