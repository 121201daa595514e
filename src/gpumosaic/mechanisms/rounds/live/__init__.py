"""Gavel's rounds on a wall clock: the round loop (``driver``) around the very
``RoundDecider`` the simulator drives, the live decider's inputs (``decider``), the
meter of steps and attained time (``meter``) and packed pairs on the share daemon
(``sharing``). It runs over the live runtime (``gpumosaic.runtime``)."""
