"""The event mechanism without a clock: ``SchedulingPass`` (queue order + placement)."""

from gpumosaic.mechanisms.event.scheduling_pass import SchedulingPass, job_shape

__all__ = ["SchedulingPass", "job_shape"]
