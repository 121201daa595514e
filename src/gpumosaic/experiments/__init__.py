"""Sweeps of runs, result files, tables and plots."""
