"""The one ``key=value`` option parser: typed fields, one on/off vocabulary, errors that
name the key."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import pytest

from gpumosaic.errors import InputError
from gpumosaic.options import (
    INFINITY_ALLOWED,
    OFF_WORDS,
    ON_WORDS,
    OptionError,
    parse_on_off,
    parse_options,
)


@dataclass(frozen=True, slots=True)
class Knobs:
    flag: bool = False
    count: int = 1
    size: float = 0.5
    mode: Literal["fast", "slow"] = "fast"
    window: tuple[int, int] | None = None
    limit: int | None = None
    cap: float = field(default=1.0, metadata={INFINITY_ALLOWED: True})  # inf: no cap

    def __post_init__(self) -> None:
        if self.count < 0:
            raise ValueError("count must be >= 0")


def test_every_field_type_converts() -> None:
    knobs = parse_options(
        Knobs, "flag=YES, count=3,size=2.5,mode=Slow,window=10-20,limit=7,cap=inf", what="knob"
    )
    assert knobs == Knobs(True, 3, 2.5, "slow", (10, 20), 7, float("inf"))


@pytest.mark.parametrize("word", ON_WORDS + tuple(w.upper() for w in ON_WORDS))
def test_on_words(word: str) -> None:
    assert parse_on_off(word, "flag") is True


@pytest.mark.parametrize("word", OFF_WORDS)
def test_off_words(word: str) -> None:
    assert parse_on_off(word, "flag") is False


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "flag=maybe",
            r"knob flag: expected on or off \(or true/false, yes/no, 1/0\), got 'maybe'",
        ),
        ("count=two", "knob count: expected a whole number, got 'two'"),
        ("size=big", "knob size: expected a number, got 'big'"),
        ("mode=medium", "knob mode: expected one of fast, slow, got 'medium'"),
        ("window=10", "knob window: expected a range A-B"),
        ("colour=red", "knob 'colour' is not an option"),
        ("sise=1", r"knob 'sise' is not an option \(did you mean 'size'\?\)"),
        ("size=inf", "knob size: expected a finite number, got 'inf'"),
        ("size=nan", "knob size: expected a finite number, got 'nan'"),
        ("cap=nan", "knob cap: expected a finite number, got 'nan'"),
        ("cap=-inf", "knob cap: expected a finite number, got '-inf'"),
        ("flag", "knob 'flag': expected key=value"),
        ("count=-1", "knob: count must be >= 0"),
    ],
)
def test_errors_name_the_key_and_the_flag(text: str, message: str) -> None:
    with pytest.raises(OptionError, match=message) as info:
        parse_options(Knobs, text, what="knob", flag="--knobs")
    assert isinstance(info.value, InputError) and info.value.field == "--knobs"


def test_base_keeps_unset_fields_and_aliases_map_to_fields() -> None:
    base = Knobs(count=5)
    assert parse_options(Knobs, "on=1", what="knob", aliases={"on": "flag"}, base=base) == Knobs(
        flag=True, count=5
    )


@pytest.mark.parametrize(
    "spec",
    ["gandiva:packing=maybe", "nvshare:anti_thrashing=maybe", "gavel:jobs=3,multigpu=maybe"],
)
def test_one_vocabulary_everywhere(spec: str) -> None:
    """``maybe`` is refused with the same words wherever an on/off option is read (nvshare's
    anti_thrashing also takes ``auto``: "expected one of auto, on, off (or true/false...")."""
    from gpumosaic.mechanisms.gandiva.sim import parse_gandiva_options
    from gpumosaic.sharing.speed import build_speed_model
    from gpumosaic.workloads.spec import parse_workload

    parse = {
        "gandiva": parse_gandiva_options,
        "nvshare": build_speed_model,
        "gavel": lambda s: parse_workload(s, 0),
    }[spec.partition(":")[0]]
    words = r"(on or off|on, off) \(or true/false, yes/no, 1/0\), got 'maybe'"
    with pytest.raises(InputError, match=words):
        parse(spec)


def test_yes_means_on_everywhere() -> None:
    from gpumosaic.mechanisms.gandiva.sim import parse_gandiva_options
    from gpumosaic.sharing.lock import AntiThrashing
    from gpumosaic.sharing.speed import build_speed_model
    from gpumosaic.workloads.spec import parse_workload

    assert parse_gandiva_options("gandiva:packing=yes,migration=no").packing is True
    speed = build_speed_model("nvshare:anti_thrashing=yes")
    assert speed.model.anti_thrashing is AntiThrashing.ON  # type: ignore[attr-defined]
    jobs = parse_workload("gavel:jobs=30,multigpu=yes", 0).workload.jobs
    assert any(j.num_gpu > 1 for j in jobs)
