"""Pausing Python's cyclic garbage collector around bulk work that makes no cycles.

Reference counting frees every object as soon as it is unreferenced; the cyclic
collector only exists for reference cycles. Work that builds or churns through many
acyclic objects (a replay's ~100,000 JobSpecs, the event simulator's per-job records)
makes the collector scan every live object again and again as the heap grows -- 10-15%
of such a run -- and find nothing. ``paused()`` switches it off for such a block and
restores its previous state after (also when the block raises).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def paused() -> Iterator[None]:
    """Run the block with the cyclic collector off; restore its state after."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
