"""Whether the service's state can be written, as a state of the service, not a crash
(docs/live.md, "State file"): a full disk, a read-only file system or a lost state file
makes ``/healthz`` answer 503 with the cause, ``/metrics`` show it, and one log line say
it (one more when it is back); meanwhile the round loop makes no decision and records no
exit (both wait, unchanged, for the state to be writable again), the API refuses writes
with 503, and jobs keep running on their leases. Nothing acknowledged is lost: a write
the API answered 2xx was committed."""

from __future__ import annotations

import logging
import sqlite3
import time
from collections.abc import Callable

log = logging.getLogger("gpumosaic.serve")
PROBE_EVERY_S = 1.0  # a real write at most this often (``/healthz`` and the loop)


class StateHealth:
    """The one owner of "the state cannot be written" (its cause, since when, counts)."""

    def __init__(self, probe: Callable[[], None], name: str) -> None:
        self._probe = probe  # raises sqlite3.Error when the state cannot be written
        self.name = name
        self.problem: str | None = None
        self.failures = 0  # transitions to unwritable
        self._probed_at = -1.0

    def lost(self, err: BaseException) -> None:
        """A write failed: the state is unwritable until a probe succeeds."""
        if self.problem is None:
            self.failures += 1
            log.error("state %s cannot be written: %s; decisions wait for it", self.name, err)
        self.problem = f"state {self.name} cannot be written: {err}"
        self._probed_at = time.monotonic()

    def check(self, *, now: float | None = None) -> str | None:
        """Probe (at most once a second) and return the problem, or None."""
        t = time.monotonic() if now is None else now
        if t - self._probed_at < PROBE_EVERY_S:
            return self.problem
        self._probed_at = t
        try:
            self._probe()
        except sqlite3.Error as err:
            self.lost(err)
            self._probed_at = t
            return self.problem
        if self.problem is not None:
            log.warning("state %s can be written again; decisions resume", self.name)
        self.problem = None
        return None

    def metrics(self) -> dict[str, float]:
        return {
            "state_writable": 0.0 if self.problem else 1.0,
            "state_write_failures_total": float(self.failures),
        }
