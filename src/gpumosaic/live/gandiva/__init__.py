"""Gandiva live (``serve --mechanism gandiva``): the wall-clock driver of the same
``GandivaDecider`` the simulator drives (``driver``), and the throughputs it starts from
(``throughputs``)."""

from gpumosaic.live.gandiva.driver import GandivaDriver, GandivaLiveCounters
from gpumosaic.live.gandiva.throughputs import LiveThroughputs

__all__ = ["GandivaDriver", "GandivaLiveCounters", "LiveThroughputs"]
