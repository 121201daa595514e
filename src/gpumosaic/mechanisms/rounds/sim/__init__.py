"""Gavel's round mechanism, simulated: ``driver`` (clock, arrivals, progress model around
the clock-free ``mechanisms.rounds.RoundDecider``), ``sharing`` (co-located speeds in a
round), ``tracker`` (the round timeline's cluster figures)."""

from gpumosaic.mechanisms.rounds.sim.driver import (
    RoundConfig,
    RoundSimulator,
    job_records,
    run_rounds,
)

__all__ = ["RoundConfig", "RoundSimulator", "job_records", "run_rounds"]
