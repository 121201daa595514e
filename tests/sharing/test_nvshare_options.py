"""nvshare's options (issue 32): one class, one spelling and one set of defaults for
``simulate`` and ``serve``; the one default that differs (anti-thrashing) comes from
``mode_defaults``; a key one mode has no use for is refused there, in one line naming
``--sharing``."""

from __future__ import annotations

from dataclasses import asdict

import pytest

from gpumosaic.errors import InputError
from gpumosaic.mode_defaults import ANTI_THRASHING, Mode
from gpumosaic.runtime.share import limits
from gpumosaic.runtime.share.spec import parse_live_sharing
from gpumosaic.sharing.lock import DEFAULT_REVOKE_GRACE_S, AntiThrashing
from gpumosaic.sharing.spec import NvshareOptions, parse_nvshare, parse_sharing


def test_both_modes_share_every_default_but_anti_thrashing() -> None:
    sim, live = parse_nvshare("", Mode.SIMULATE), parse_nvshare("", Mode.SERVE)
    assert (sim.anti_thrashing, live.anti_thrashing) == (
        ANTI_THRASHING.simulate,
        ANTI_THRASHING.serve,
    )
    assert asdict(sim) | {"anti_thrashing": ""} == asdict(live) | {"anti_thrashing": ""}
    assert parse_sharing("nvshare").nvshare == sim  # simulate's --sharing


def test_one_spelling_in_both_modes() -> None:
    for mode in Mode:
        options = parse_nvshare("tq=2.5,at=off", mode)
        assert (options.tq, options.mode) == (2.5, AntiThrashing.OFF)


@pytest.mark.parametrize(
    ("mode", "text", "key"),
    [
        (Mode.SIMULATE, "tq=1,grace=2", "grace"),
        (Mode.SIMULATE, "mem_cap=on", "mem_cap"),
        (Mode.SERVE, "jobs_per_gpu=3", "jobs_per_gpu"),
    ],
)
def test_a_key_the_mode_has_no_use_for_is_refused(mode: Mode, text: str, key: str) -> None:
    with pytest.raises(InputError) as err:
        parse_nvshare(text, mode)
    assert err.value.field == "--sharing" and key in err.value.message


@pytest.mark.parametrize("text", ["tq=0", "tq=inf", "grace=-1", "mem_cap=lots", "mem_cap=-5"])
def test_bad_values_are_refused_alike(text: str) -> None:
    with pytest.raises(InputError):
        parse_nvshare(text, Mode.SERVE)


def test_mem_cap_reads_as_the_daemon_reads_it() -> None:
    assert parse_nvshare("mem_cap=on", Mode.SERVE).mem_cap_share
    assert parse_nvshare("mem_cap=512", Mode.SERVE).mem_cap_mib == 512.0
    off = parse_nvshare("", Mode.SERVE)
    assert not off.mem_cap_share and off.mem_cap_mib is None


@pytest.mark.parametrize("text", ["nvshare", "nvshare:tq=2.5,at=on,mem_cap=on", "nvshare:grace=1"])
def test_serve_reads_sharing_with_the_one_class(text: str) -> None:
    """``serve --sharing`` is read by ``parse_nvshare`` itself: the same class, values
    and defaults as simulate's (anti-thrashing's default is serve's)."""
    live = parse_live_sharing(text)
    assert isinstance(live, NvshareOptions)
    assert live == parse_nvshare(text.partition(":")[2], Mode.SERVE)
    assert DEFAULT_REVOKE_GRACE_S == limits.DEFAULT_REVOKE_GRACE_S


def test_serve_holds_sharing_to_the_daemon_s_bounds() -> None:
    with pytest.raises(InputError, match="--sharing"):
        parse_live_sharing("nvshare:tq=100000")  # a positive tq, but over a day
