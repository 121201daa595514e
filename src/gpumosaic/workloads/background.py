"""``--background TASKS[,fraction=F]``'s grammar, plain Python: a description is checked
with it before numpy loads; ``placement/background.py`` pre-fills the cluster from the value."""

from __future__ import annotations

from dataclasses import dataclass

from gpumosaic.errors import InputError
from gpumosaic.options import parse_options

DEFAULT_FRACTION = 0.8


@dataclass(frozen=True, slots=True)
class BackgroundOptions:
    """The options after the task list: ``fraction`` of GPU capacity to pre-fill."""

    fraction: float = DEFAULT_FRACTION

    def __post_init__(self) -> None:
        if not 0 < self.fraction <= 1:
            raise ValueError(f"fraction must be in (0, 1], got {self.fraction:g}")


@dataclass(frozen=True, slots=True)
class BackgroundSpec:
    """``--background TASKS[,fraction=F]``: an openb task list (``openb:default``) or a
    task CSV in the openb format, pre-filled to ``F`` of GPU capacity (default 0.8)."""

    source: str
    fraction: float = DEFAULT_FRACTION

    @classmethod
    def parse(cls, text: str) -> BackgroundSpec:
        source, _, rest = text.strip().partition(",")
        if not source.strip():
            raise InputError(
                "name a task list, e.g. openb:default,fraction=0.8", field="--background"
            )
        options = parse_options(
            BackgroundOptions, rest, what="background option", flag="--background"
        )
        return cls(source.strip(), options.fraction)
