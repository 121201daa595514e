"""Drivers with a wall clock: the services that put gpumosaic's decisions on real clusters."""
