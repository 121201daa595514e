"""The wire format: every incoming line is checked once, by parse_request."""

from __future__ import annotations

import pytest

from gpumosaic.runtime.share import limits
from gpumosaic.runtime.share.protocol import (
    LockReleased,
    Memory,
    MessageType,
    ProtocolError,
    Register,
    RequestLock,
    SetMode,
    SetTq,
    StatusQuery,
    decision_message,
    error,
    message,
    parse,
    parse_request,
)
from gpumosaic.sharing.lock import AntiThrashing, Drop, Grant, Revoke, Schedule


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        (b"REGISTER pid=42 name=python3\n", Register(42, "python3")),
        (b"REQ_LOCK\n", RequestLock()),
        (b"LOCK_RELEASED\r\n", LockReleased()),
        (b"MEM bytes=10 total=20\n", Memory(10, 20)),
        (b"SET_TQ tq=2.5\n", SetTq(2.5)),
        (b"SET_TQ tq=1e3\n", SetTq(1000.0)),
        (b"SET_MODE anti_thrashing=auto\n", SetMode(AntiThrashing.AUTO)),
        (b"STATUS", StatusQuery()),  # the last line before EOF may lack its newline
    ],
)
def test_valid_requests(line, expected) -> None:
    assert parse_request(line) == expected


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        (b"\n", "empty_line"),
        (b"NOPE\n", "unknown_type"),
        (b"LOCK_OK\n", "not_a_request"),  # the daemon's own message
        (b"SET_TQ\n", "missing_field"),  # a bare SET_TQ is an error, never a spin
        (b"SET_TQ tq=\n", "empty_field"),
        (b"SET_TQ tq=nan\n", "bad_value"),
        (b"SET_TQ tq=inf\n", "bad_value"),
        (b"SET_TQ tq=-1\n", "bad_value"),
        (b"SET_TQ tq=0\n", "bad_value"),
        (b"SET_TQ tq=1e300\n", "bad_value"),
        (b"SET_TQ tq=0x10\n", "bad_value"),
        (b"SET_TQ tq=1_0\n", "bad_value"),
        (b"SET_TQ tq=\xd9\xa3\n", "not_printable_ascii"),  # an Arabic-Indic digit
        (b"SET_TQ tq=5 tq=6\n", "duplicate_field"),
        (b"SET_TQ tq=5 x=1\n", "unexpected_field"),
        (b"SET_TQ 5\n", "unexpected_field"),
        (b"SET_MODE anti_thrashing=maybe\n", "bad_value"),
        (b"REGISTER pid=1\n", "missing_field"),
        (b"REGISTER pid=-1 name=a\n", "bad_value"),
        (b"REGISTER pid=99999999999999999999999 name=a\n", "bad_value"),
        (b"REGISTER pid=1 name=" + b"x" * 65 + b"\n", "bad_value"),
        (b"MEM bytes=1 total=" + str(2**60).encode() + b"\n", "bad_value"),
        (b"REQ_LOCK now\n", "unexpected_field"),
        (b"REQ_LOCK\x00\n", "not_printable_ascii"),
        (b"STATUS\tx\n", "not_printable_ascii"),
        (b"STATUS " + b"x" * limits.MAX_LINE + b"\n", "line_too_long"),
    ],
)
def test_invalid_requests_name_their_reason(line, reason) -> None:
    with pytest.raises(ProtocolError) as err:
        parse_request(line)
    assert err.value.reason == reason


def test_error_replies_are_one_well_formed_line() -> None:
    reply = error("bad value", "tq must be a finite number, got nan\n\x00 é").encode()
    assert reply.endswith(b"\n") and reply.count(b"\n") == 1 and reply.isascii()
    msg = parse(reply)
    assert msg.type is MessageType.ERROR and msg.get("reason") == "bad_value"
    assert " " not in (msg.get("detail") or " ")


def test_decisions_travel_as_nvshare_messages() -> None:
    assert decision_message(Grant(3, True)).encode() == b"LOCK_OK\n"
    assert decision_message(Drop(3)).encode() == b"DROP_LOCK\n"
    assert decision_message(Revoke(3)).encode() == b"LOCK_REVOKED\n"
    on = decision_message(Schedule(26, True)).encode()
    assert on == b"SCHED_ON id=000000000000001a\n"
    assert decision_message(Schedule(1, False)).type is MessageType.SCHED_OFF
    assert message(MessageType.SET_TQ, tq=5).encode() == b"SET_TQ tq=5\n"
    with pytest.raises(ProtocolError):
        message(MessageType.SET_TQ, tq="5 6")
