"""Test-wide settings: hypothesis draws the same examples on every run (CI included),
so a failure or a slow case reproduces exactly."""

from hypothesis import settings

settings.register_profile("gpumosaic", derandomize=True, deadline=None, print_blob=True)
settings.load_profile("gpumosaic")
