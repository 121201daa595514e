"""The wire format between the interposer, the daemon and the control commands.

One ASCII line per message: ``TYPE key=value ...\\n`` (no spaces inside a value). nvshare's
message meanings are kept; the daemon answers ``ERROR reason=...`` to anything it does not
understand. See docs/share.md for the full table.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

MAX_LINE = 4096


class MessageType(StrEnum):
    # client -> daemon
    REGISTER = "REGISTER"  # pid=, name=: a new client; answered SCHED_ON or SCHED_OFF
    REQ_LOCK = "REQ_LOCK"  # once per wait; answered LOCK_OK in FCFS order
    LOCK_RELEASED = "LOCK_RELEASED"  # after DROP_LOCK (context synchronized), or early
    MEM = "MEM"  # bytes=, total=: this client's managed allocations and the GPU's memory
    # daemon -> client
    SCHED_ON = "SCHED_ON"  # id=: work is serialized (anti-thrashing), ask for the lock
    SCHED_OFF = "SCHED_OFF"  # id=: everybody runs; no lock needed
    LOCK_OK = "LOCK_OK"  # you hold the GPU
    DROP_LOCK = "DROP_LOCK"  # your quantum expired and someone waits: sync and release
    # control (share ctl / status) -> daemon, answered OK, STATUS, METRICS or ERROR
    SET_TQ = "SET_TQ"  # tq=seconds
    SET_MODE = "SET_MODE"  # anti_thrashing=on|off|auto
    STATUS = "STATUS"  # answered STATUS json=<one-line JSON>
    METRICS = "METRICS"  # answered METRICS lines=N, then N lines of Prometheus text
    OK = "OK"
    ERROR = "ERROR"


@dataclass(frozen=True, slots=True)
class Message:
    type: MessageType
    fields: tuple[tuple[str, str], ...] = ()

    def get(self, key: str, default: str | None = None) -> str | None:
        for k, v in self.fields:
            if k == key:
                return v
        return default

    def encode(self) -> bytes:
        parts = [self.type.value, *(f"{k}={v}" for k, v in self.fields)]
        return (" ".join(parts) + "\n").encode()


class ProtocolError(ValueError):
    """A line that is not a message."""


def message(kind: MessageType, **fields: object) -> Message:
    for key, value in fields.items():
        text = str(value)
        if not text or any(c.isspace() for c in text):
            raise ProtocolError(f"field {key}={text!r} must be non-empty without spaces")
    return Message(kind, tuple((k, str(v)) for k, v in fields.items()))


def parse(line: bytes | str) -> Message:
    text = line.decode("ascii", "replace") if isinstance(line, bytes) else line
    parts = text.strip().split()
    if not parts:
        raise ProtocolError("empty line")
    try:
        kind = MessageType(parts[0])
    except ValueError:
        raise ProtocolError(f"unknown message type {parts[0]!r}") from None
    fields: list[tuple[str, str]] = []
    for part in parts[1:]:
        key, sep, value = part.partition("=")
        if not sep or not key:
            raise ProtocolError(f"bad field {part!r} in {kind.value}")
        fields.append((key, value))
    return Message(kind, tuple(fields))
