"""The event mechanism, one package: the clock-free ``SchedulingPass`` (queue order +
placement, ``scheduling_pass``), its simulated driver (``simulator``), the gang placement
it uses (``gang``) and its plug-in (``plugin``).

The names load on first use (PEP 562): the plug-in is imported to validate every run
description, and a user mistake's one line must not pay for numpy."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpumosaic.lazy import lazy_names

if TYPE_CHECKING:
    from gpumosaic.mechanisms.event.scheduling_pass import SchedulingPass, job_shape

__getattr__ = lazy_names(
    __name__, dict.fromkeys(("SchedulingPass", "job_shape"), "scheduling_pass")
)

__all__ = ["SchedulingPass", "job_shape"]
