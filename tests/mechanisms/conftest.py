"""Puts tests/sim on the import path, so tests in its subfolders share its builders
(``sim_builders``, ``rounds_builders``)."""
