"""gpumosaic: schedule and simulate deep-learning jobs on shared GPU clusters."""

__version__ = "0.1.0"
