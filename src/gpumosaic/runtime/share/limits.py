"""Every bound on what the share daemon accepts, from the command line and from its sockets.

One place: the daemon's flags (``cli/share.py``), ``share ctl`` (``client.py``) and the
socket's messages (``protocol.parse_request``) all check their values here, so a TQ of
``nan`` is refused the same way whichever road it comes by. Each check raises
``ValueError`` with a message that names the value; callers add the flag or the field.
"""

from __future__ import annotations

import math
import re

from gpumosaic.sharing import lock

# A quantum shorter than 10 ms is below the daemon's own turn-around under load; one longer
# than a day is a mistake (anti-thrashing off is the way to never hand over).
TQ_MIN_S = 0.01
TQ_MAX_S = 86_400.0
# After DROP_LOCK a holder has TQ + grace to release before its lock is revoked (the
# share lock's own default, one number for the model and the daemon).
DEFAULT_REVOKE_GRACE_S = lock.DEFAULT_REVOKE_GRACE_S
GRACE_MAX_S = 3_600.0
MEMORY_MIB_MAX = 2.0**30  # 1 PiB: larger than any GPU
BYTES_MAX = 2**50  # a client's reported allocations or GPU memory (1 PiB)
PID_MAX = 4_194_304  # Linux's largest pid_max
NAME_MAX = 64
GPU_INDEX_MAX = 1023
SLOTS_MAX = 1000  # device-plugin slots per GPU (nvshare advertises 10)
MAX_LINE = 512  # bytes in one incoming message, newline included (the interposer's < 200)
MAX_CONNECTIONS = 512  # per daemon, all sockets together; beyond: ERROR and close
# Fair shares of those (the peer's pid and uid from the socket, SO_PEERCRED): one process
# or one user cannot hold enough connections to keep another from registering or asking
# STATUS (docs/share.md, "Limits").
MAX_CONNECTIONS_PER_PROCESS = 16
MAX_CONNECTIONS_PER_USER = 128
WRITE_BUFFER_MAX = 1 << 20  # bytes queued to one peer that does not read: it is dropped
CONTROL_IDLE_S = 30.0  # a connection that has not registered must speak within this

_NAME = re.compile(rf"[!-~]{{1,{NAME_MAX}}}")  # printable ASCII, no spaces


def _finite(value: float, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{what} must be a number, got {value!r}")
    if not math.isfinite(value):
        raise ValueError(f"{what} must be a finite number, got {value}")
    return float(value)


def tq_seconds(value: float) -> float:
    """A time quantum in seconds: finite, in [TQ_MIN_S, TQ_MAX_S]."""
    tq = _finite(value, "tq")
    if not TQ_MIN_S <= tq <= TQ_MAX_S:
        raise ValueError(f"tq must be between {TQ_MIN_S:g} and {TQ_MAX_S:g} seconds, got {tq:g}")
    return tq


def grace_seconds(value: float) -> float:
    grace = _finite(value, "grace")
    if not 0 <= grace <= GRACE_MAX_S:
        raise ValueError(f"grace must be between 0 and {GRACE_MAX_S:g} seconds, got {grace:g}")
    return grace


def memory_mib(value: float) -> float:
    mib = _finite(value, "memory")
    if not 0 < mib <= MEMORY_MIB_MAX:
        raise ValueError(f"memory must be > 0 and <= {MEMORY_MIB_MAX:g} MiB, got {mib:g}")
    return mib


def gpu_index(value: int) -> int:
    if not 0 <= value <= GPU_INDEX_MAX:
        raise ValueError(f"GPU index must be between 0 and {GPU_INDEX_MAX}, got {value}")
    return value


def port(value: int) -> int:
    if not 0 <= value <= 65_535:
        raise ValueError(f"port must be between 0 and 65535, got {value}")
    return value


def parse_int(text: str, what: str, low: int, high: int) -> int:
    """A decimal integer written in ASCII digits, in [low, high]."""
    if not (text.isascii() and text.isdigit()) or len(text) > 20:
        raise ValueError(f"{what} must be a whole number, got {text[:24]!r}")
    value = int(text)
    if not low <= value <= high:
        raise ValueError(f"{what} must be between {low} and {high}, got {value}")
    return value


def parse_seconds(text: str, what: str) -> float:
    """A decimal number of seconds (no nan, inf, hex or underscores)."""
    if not re.fullmatch(r"[0-9]{1,12}(\.[0-9]{1,12})?([eE][-+]?[0-9]{1,3})?", text):
        raise ValueError(f"{what} must be a decimal number of seconds, got {text[:24]!r}")
    return float(text)


def client_name(text: str) -> str:
    if not _NAME.fullmatch(text):
        raise ValueError(f"name must be 1-{NAME_MAX} printable ASCII characters without spaces")
    return text
