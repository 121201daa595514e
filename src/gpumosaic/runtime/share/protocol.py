"""The wire format between the interposer, the daemon and the control commands.

One ASCII line per message: ``TYPE key=value ...\\n`` (no spaces inside a value). nvshare's
message meanings are kept. Every line the daemon reads is checked here, once
(``parse_request``): at most ``limits.MAX_LINE`` bytes, printable ASCII, a known type that a
client may send, exactly the fields that type takes, each value in its documented range.
Anything else is a ``ProtocolError`` whose ``reason`` the daemon answers as
``ERROR reason=...``. See docs/share.md for the full table.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

from gpumosaic.runtime.share import limits
from gpumosaic.sharing.lock import AntiThrashing, Decision, Drop, Grant, Revoke

MAX_LINE = limits.MAX_LINE


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
    LOCK_REVOKED = "LOCK_REVOKED"  # you did not release in time: you no longer hold it
    # control (share ctl / status) -> daemon, answered OK, STATUS, METRICS or ERROR
    SET_TQ = "SET_TQ"  # tq=seconds
    SET_MODE = "SET_MODE"  # anti_thrashing=on|off|auto
    STATUS = "STATUS"  # answered STATUS <one-line JSON>
    METRICS = "METRICS"  # answered METRICS lines=N, then N lines of Prometheus text
    OK = "OK"
    ERROR = "ERROR"  # reason=<token> [detail=<words_joined_by_underscores>]


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
    """A line that is not a valid request; ``reason`` is a short token for the reply."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.detail = detail


def message(kind: MessageType, **fields: object) -> Message:
    for key, value in fields.items():
        text = str(value)
        if not text or any(c.isspace() for c in text):
            raise ProtocolError("bad_field", f"field {key}={text!r} must be non-empty, no spaces")
    return Message(kind, tuple((k, str(v)) for k, v in fields.items()))


def parse(line: bytes | str) -> Message:
    """Any message, unchecked beyond its shape (for replies read by the clients)."""
    text = line.decode("ascii", "replace") if isinstance(line, bytes) else line
    parts = text.strip().split()
    if not parts:
        raise ProtocolError("empty_line")
    try:
        kind = MessageType(parts[0])
    except ValueError:
        raise ProtocolError("unknown_type", parts[0][:32]) from None
    fields: list[tuple[str, str]] = []
    for part in parts[1:]:
        key, sep, value = part.partition("=")
        if not sep or not key:
            raise ProtocolError("bad_field", part[:32])
        fields.append((key, value))
    return Message(kind, tuple(fields))


_TOKEN = re.compile(r"[^A-Za-z0-9_.:=-]")


def error(reason: str, detail: str = "") -> Message:
    """``ERROR reason=... [detail=...]``: ASCII tokens, bounded, always one line."""
    fields = [("reason", _TOKEN.sub("_", reason)[:64] or "bad_message")]
    if detail:
        fields.append(("detail", _TOKEN.sub("_", detail.replace(" ", "_"))[:160]))
    return Message(MessageType.ERROR, tuple(fields))


# --- requests: what a client or a control command may send --------------------------------


@dataclass(frozen=True, slots=True)
class Register:
    pid: int
    name: str


@dataclass(frozen=True, slots=True)
class RequestLock:
    pass


@dataclass(frozen=True, slots=True)
class LockReleased:
    pass


@dataclass(frozen=True, slots=True)
class Memory:
    used_bytes: int
    total_bytes: int


@dataclass(frozen=True, slots=True)
class SetTq:
    tq_s: float


@dataclass(frozen=True, slots=True)
class SetMode:
    mode: AntiThrashing


@dataclass(frozen=True, slots=True)
class StatusQuery:
    pass


@dataclass(frozen=True, slots=True)
class MetricsQuery:
    pass


Request = (
    Register | RequestLock | LockReleased | Memory | SetTq | SetMode | StatusQuery | MetricsQuery
)

# The fields each request takes, all required.
_FIELDS: dict[MessageType, tuple[str, ...]] = {
    MessageType.REGISTER: ("pid", "name"),
    MessageType.REQ_LOCK: (),
    MessageType.LOCK_RELEASED: (),
    MessageType.MEM: ("bytes", "total"),
    MessageType.SET_TQ: ("tq",),
    MessageType.SET_MODE: ("anti_thrashing",),
    MessageType.STATUS: (),
    MessageType.METRICS: (),
}
_PRINTABLE = re.compile(rb"[ -~]*")


def parse_request(line: bytes) -> Request:
    """The one check of an incoming line (see module doc)."""
    if len(line) > MAX_LINE:
        raise ProtocolError("line_too_long", f"at most {MAX_LINE} bytes")
    body = line[:-1] if line.endswith(b"\n") else line
    if body.endswith(b"\r"):
        body = body[:-1]
    if not _PRINTABLE.fullmatch(body):
        raise ProtocolError("not_printable_ascii")
    parts = body.decode("ascii").split()
    if not parts:
        raise ProtocolError("empty_line")
    try:
        kind = MessageType(parts[0])
    except ValueError:
        raise ProtocolError("unknown_type", parts[0][:32]) from None
    wanted = _FIELDS.get(kind)
    if wanted is None:
        raise ProtocolError("not_a_request", kind.value)
    fields: dict[str, str] = {}
    for part in parts[1:]:
        key, sep, value = part.partition("=")
        if not sep or key not in wanted:
            raise ProtocolError("unexpected_field", part[:32])
        if key in fields:
            raise ProtocolError("duplicate_field", key)
        if not value:
            raise ProtocolError("empty_field", key)
        fields[key] = value
    missing = [k for k in wanted if k not in fields]
    if missing:
        raise ProtocolError("missing_field", missing[0])
    try:
        return _build(kind, fields)
    except ValueError as err:
        raise ProtocolError("bad_value", str(err)) from None


def _build(kind: MessageType, f: dict[str, str]) -> Request:
    if kind is MessageType.REGISTER:
        pid = limits.parse_int(f["pid"], "pid", 0, limits.PID_MAX)
        return Register(pid, limits.client_name(f["name"]))
    if kind is MessageType.MEM:
        used = limits.parse_int(f["bytes"], "bytes", 0, limits.BYTES_MAX)
        return Memory(used, limits.parse_int(f["total"], "total", 0, limits.BYTES_MAX))
    if kind is MessageType.SET_TQ:
        return SetTq(limits.tq_seconds(limits.parse_seconds(f["tq"], "tq")))
    if kind is MessageType.SET_MODE:
        try:
            return SetMode(AntiThrashing(f["anti_thrashing"]))
        except ValueError:
            raise ValueError("anti_thrashing must be on, off or auto") from None
    simple: dict[MessageType, Request] = {
        MessageType.REQ_LOCK: RequestLock(),
        MessageType.LOCK_RELEASED: LockReleased(),
        MessageType.STATUS: StatusQuery(),
        MessageType.METRICS: MetricsQuery(),
    }
    return simple[kind]


def decision_message(decision: Decision) -> Message:
    """The message that carries one of the lock's decisions to its client."""
    if isinstance(decision, Grant):
        return Message(MessageType.LOCK_OK)
    if isinstance(decision, Drop):
        return Message(MessageType.DROP_LOCK)
    if isinstance(decision, Revoke):
        return Message(MessageType.LOCK_REVOKED)
    kind = MessageType.SCHED_ON if decision.serialized else MessageType.SCHED_OFF
    return message(kind, id=f"{decision.client_id:016x}")
