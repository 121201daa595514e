"""Studies: an experiment file (TOML) declares a grid of runs; ``execute`` runs it into a
result store (``experiments/results``), resuming where it stopped."""
