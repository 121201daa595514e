"""``--sharing``'s grammar, plain Python: the name, its typed options, and every refusal
(one ``InputError`` naming ``--sharing``). ``build_speed_model`` (``speed.py``) and
``build_interference`` (``interference.py``) build from what ``parse_sharing`` returns,
and a description is checked with it before anything heavy loads (no numpy here).

Spellings: ``none``, ``capped``, ``parametric[:busy=B,alpha=A]``,
``measured[:busy=B,alpha=A]``, ``nvshare[:tq=30,anti_thrashing=on,jobs_per_gpu=2]``;
``gandiva[:...]`` names Gandiva's mechanism, whose options it parses itself
(``mechanisms/gandiva/config.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from gpumosaic.errors import InputError, unknown_name
from gpumosaic.mode_defaults import ANTI_THRASHING
from gpumosaic.options import parse_options, split_options
from gpumosaic.sharing.gpu_phase import GPU_PHASE_BUSY
from gpumosaic.sharing.lock import DEFAULT_TQ_S, NVSHARE_ALIASES, AntiThrashing

SHARING_MODELS = ("none", "parametric", "measured", "capped", "nvshare", "gandiva")

DEFAULT_ALPHA = 0.0


def split_spec(spec: str) -> tuple[str, str]:
    """``name[:key=value,...]`` -> (name in lower case, the option text)."""
    name, _, rest = spec.strip().partition(":")
    return name.strip().lower(), rest


def check_parametric(alpha: float, busy: float) -> None:
    """The parametric model's parameters (``ParametricInterference`` checks with this)."""
    if alpha < 0:
        raise ValueError(f"alpha must be >= 0, got {alpha}")
    if not 0.0 < busy <= 1.0:
        raise ValueError(f"busy must be in (0, 1], got {busy}")


@dataclass(frozen=True, slots=True)
class ParametricOptions:
    """The options of ``parametric:...`` (and of ``measured:...``, for unmeasured pairs)."""

    alpha: float = DEFAULT_ALPHA
    busy: float = GPU_PHASE_BUSY


@dataclass(frozen=True, slots=True)
class NvshareOptions:
    """The options of ``--sharing nvshare:...``."""

    tq: float = DEFAULT_TQ_S  # time quantum, seconds (the same default live)
    # on / off / auto (AntiThrashing.parse); simulated default ``on``, live ``auto``
    # (``mode_defaults.ANTI_THRASHING`` says why)
    anti_thrashing: str = ANTI_THRASHING.simulate
    jobs_per_gpu: int = 2

    @property
    def mode(self) -> AntiThrashing:
        return AntiThrashing.parse(self.anti_thrashing)

    def __post_init__(self) -> None:
        self.mode  # noqa: B018 - raises ValueError on a word the lock does not know
        if not self.tq > 0:
            raise ValueError("tq must be a positive number of seconds")
        if self.jobs_per_gpu < 1:
            raise ValueError("jobs_per_gpu must be >= 1")


@dataclass(frozen=True, slots=True)
class SharingChoice:
    """A parsed ``--sharing`` speed model: its name and the options it takes."""

    name: Literal["none", "capped", "parametric", "measured", "nvshare"]
    parametric: ParametricOptions | None = None  # parametric, measured (its fallback)
    nvshare: NvshareOptions | None = None


def parse_sharing(spec: str) -> SharingChoice:
    """A speed model's ``--sharing`` (every name but ``gandiva``, a mechanism), checked."""
    name, rest = split_spec(spec)
    if name == "capped":
        if split_options(rest, "capped option", "--sharing"):
            raise InputError("'capped' takes no options", field="--sharing")
        return SharingChoice("capped")
    if name == "nvshare":
        options = parse_options(
            NvshareOptions, rest, what="nvshare option", flag="--sharing", aliases=NVSHARE_ALIASES
        )
        return SharingChoice("nvshare", nvshare=options)
    if name == "none":
        if split_options(rest, "interference option", "--sharing"):
            raise InputError(f"'none' takes no options: {spec!r}", field="--sharing")
        return SharingChoice("none")
    if name in ("parametric", "measured"):
        parametric = parse_options(
            ParametricOptions, rest, what="interference option", flag="--sharing"
        )
        try:
            check_parametric(parametric.alpha, parametric.busy)
        except ValueError as err:
            raise InputError(f"{err} in {spec!r}", field="--sharing") from None
        return SharingChoice("parametric" if name == "parametric" else "measured", parametric)
    # Every --sharing name that is neither a speed model nor gandiva (a mechanism): the
    # user's choice is among all of them.
    raise unknown_name("sharing model", name, SHARING_MODELS, field="--sharing")


def is_gandiva(sharing: str) -> bool:
    """``--sharing gandiva[:...]`` runs Gandiva's own scheduler instead of a mechanism."""
    return sharing.strip().lower().startswith("gandiva")
