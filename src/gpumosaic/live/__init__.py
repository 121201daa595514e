"""Drivers with a wall clock: the round service executing on Ray (``live.rounds``)."""
