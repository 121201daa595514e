"""Plots of stored runs, sweeps and fill replays (matplotlib, imported only when asked)."""
