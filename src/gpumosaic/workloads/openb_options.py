"""The options of ``--workload openb:NAME[,compress=K][,inflate=F][,pending=keep|drop]``
(``openb_replay.py``), plain Python: a ``--workload`` is checked with them before numpy
loads."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from gpumosaic.options import parse_options

OPTIONS = ("compress", "inflate", "pending")  # OpenbReplayOptions' fields


@dataclass(frozen=True, slots=True)
class OpenbReplayOptions:
    """The options after ``openb:NAME,...`` (``openb_replay``'s module doc)."""

    compress: float = 1.0
    inflate: float = 1.0
    pending: Literal["keep", "drop"] = "keep"

    def __post_init__(self) -> None:
        if not self.compress > 0:
            raise ValueError(f"compress must be a positive number, got {self.compress}")
        if not self.inflate >= 1:
            raise ValueError(f"inflate must be a number >= 1, got {self.inflate}")


def parse_openb_replay(spec: str) -> tuple[str, OpenbReplayOptions]:
    """``openb:NAME,compress=2`` -> (``openb:NAME``, its options), checked."""
    base, _, rest = spec.partition(",")
    options = parse_options(OpenbReplayOptions, rest, what="openb option", flag="--workload")
    return base.strip(), options
