"""The one way a test waits for a service, a daemon or a process: on its own progress (a
state, a counter, a line it printed), polled, with a bound far above the expected time, so
that a loaded machine only makes the wait longer, never the test fail. A timeout says what
was awaited and what was last seen.

Import it as ``from waiting import wait_for`` (tests/ is on the import path: tests/conftest.py
lives there)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_for(
    observe: Callable[[], T],
    timeout_s: float,
    what: str,
    explain: Callable[[], str] | None = None,
    *,
    until: Callable[[T], object] = bool,
    poll_s: float = 0.05,
) -> T:
    """Poll ``observe()`` until ``until(value)`` holds (by default: the value is truthy)
    and return that value. After ``timeout_s`` raise AssertionError with ``what`` and the
    last value seen (or ``explain()``, where a richer account helps)."""
    give_up = time.monotonic() + timeout_s
    while True:
        seen = observe()
        if until(seen):
            return seen
        if time.monotonic() > give_up:
            last = explain() if explain is not None else repr(seen)
            raise AssertionError(
                f"timed out after {timeout_s:g} s waiting for {what}; last seen: {last}"
            )
        time.sleep(poll_s)
