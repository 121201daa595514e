"""Gandiva live (``serve --mechanism gandiva``): the wall-clock driver of the same
``GandivaDecider`` the simulator drives (``driver``), the throughputs it starts from
(``throughputs``) and the emulated job that steps at its packed pair's rate while it
shares its GPU (``emulate``, what ``sim-vs-live --mechanism gandiva`` submits).

Nothing is imported here: an emulated job's process starts with ``python -m
gpumosaic.mechanisms.gandiva.live.emulate`` and must not pay for the driver's imports."""
