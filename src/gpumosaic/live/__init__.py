"""Drivers with a wall clock: services that run real jobs."""
