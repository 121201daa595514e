"""The ``--sharing gandiva:...`` spelling."""

from __future__ import annotations

import pytest

from gpumosaic.mechanisms.gandiva.config import (
    GandivaConfig,
    GandivaOptionError,
    parse_gandiva_options,
)


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("gandiva", GandivaConfig()),
        ("gandiva:", GandivaConfig()),
        ("gandiva:packing=on,migration=on", GandivaConfig(packing=True, migration=True)),
        ("gandiva:packing=off,migration=no", GandivaConfig(packing=False, migration=False)),
        ("Gandiva: ts=off , quantum=30", GandivaConfig(time_slicing=False, quantum_s=30.0)),
        ("packing=false,switch=0.5", GandivaConfig(packing=False, switch_s=0.5)),
        (
            "gandiva:migration_cost=10,max_share=3,profile=120,margin=0.05,pack_tries=2",
            GandivaConfig(
                migration_cost_s=10.0,
                max_share=3,
                profile_s=120.0,
                pack_margin=0.05,
                max_pack_tries=2,
            ),
        ),
        (
            "gandiva:quantum_s=90,util_limit=inf",
            GandivaConfig(quantum_s=90.0, pack_util_limit=float("inf")),
        ),
    ],
)
def test_parse(spec: str, expected: GandivaConfig) -> None:
    assert parse_gandiva_options(spec) == expected


@pytest.mark.parametrize(
    ("spec", "names"),
    [
        ("gandiva:packing=maybe", "packing"),
        ("gandiva:quantum=fast", "quantum"),
        ("gandiva:colour=blue", "colour"),
        ("gandiva:packing", "packing"),
        ("nvshare:tq=30", "nvshare"),
        ("gandiva:quantum=0", "quantum_s"),
        ("gandiva:switch=90", "switch_s"),
    ],
)
def test_bad_options_name_the_key(spec: str, names: str) -> None:
    with pytest.raises(GandivaOptionError, match=names):
        parse_gandiva_options(spec)


def test_start_cost_is_an_option_and_not_negative() -> None:
    assert parse_gandiva_options("gandiva:start=2.5").start_s == 2.5
    assert GandivaConfig().start_s == 0.0  # the simulator's default: Gandiva's own model
    with pytest.raises(GandivaOptionError, match="start_s"):
        GandivaConfig(start_s=-1.0)
