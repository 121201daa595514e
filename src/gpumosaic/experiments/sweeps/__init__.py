"""Sweeps: many runs of one kind (runs, policies x rates, fill replays) in parallel."""
