"""Drivers with a wall clock: services that run real jobs and put gpumosaic's decisions on
real clusters (the Kubernetes extender in live/extender)."""
