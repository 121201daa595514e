"""Puts tests/placement on the import path, so tests in its subfolders share its builders
(``placement_builders``)."""
