"""``cyclic_gc.paused``: the collector is off inside and as it was after, even on error."""

from __future__ import annotations

import gc

import pytest

from gpumosaic import cyclic_gc


def test_paused_switches_the_collector_off_and_restores_its_state() -> None:
    try:
        for enabled in (True, False):
            (gc.enable if enabled else gc.disable)()
            with cyclic_gc.paused():
                assert not gc.isenabled()
            assert gc.isenabled() is enabled
            with pytest.raises(RuntimeError), cyclic_gc.paused():
                raise RuntimeError("inside")
            assert gc.isenabled() is enabled
    finally:
        gc.enable()
