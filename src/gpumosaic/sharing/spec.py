"""``--sharing``'s grammar, plain Python: the name, its typed options, and every refusal
(one ``InputError`` naming ``--sharing``). ``build_speed_model`` (``speed.py``) and
``build_interference`` (``interference.py``) build from what ``parse_sharing`` returns,
and a description is checked with it before anything heavy loads (no numpy here).

Spellings: ``none``, ``capped``, ``parametric[:busy=B,alpha=A]``,
``measured[:busy=B,alpha=A]``, ``nvshare[:tq=30,anti_thrashing=on,jobs_per_gpu=2]``
(``NvshareOptions``: the one class of nvshare's options, ``serve`` parses it with
``parse_nvshare`` too);
``gandiva[:...]`` names Gandiva's mechanism, whose options it parses itself
(``mechanisms/gandiva/config.py``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from gpumosaic.errors import InputError, unknown_name
from gpumosaic.mode_defaults import ANTI_THRASHING, Mode
from gpumosaic.options import OFF_WORDS, ON_WORDS, parse_options, split_options
from gpumosaic.sharing.gpu_phase import GPU_PHASE_BUSY
from gpumosaic.sharing.lock import (
    DEFAULT_REVOKE_GRACE_S,
    DEFAULT_TQ_S,
    NVSHARE_ALIASES,
    AntiThrashing,
)

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
    """The options of ``--sharing nvshare:...``, for ``simulate`` and ``serve`` alike: one
    spelling (``NVSHARE_ALIASES``), one set of defaults, except anti-thrashing's, which
    differs by mode and is stated in ``mode_defaults.ANTI_THRASHING`` (``parse_nvshare``
    applies it). A key one mode has no use for is refused there (``SIMULATE_ONLY``,
    ``SERVE_ONLY``), never dropped silently."""

    tq: float = DEFAULT_TQ_S  # time quantum, seconds
    # on / off / auto (AntiThrashing.parse); the default is the mode's (module doc)
    anti_thrashing: str = ANTI_THRASHING.simulate
    # simulate: a whole-GPU job is admitted as a 1/jobs_per_gpu time share of a GPU
    jobs_per_gpu: int = 2
    # serve: the share daemon's revocation grace, seconds (``GpuLock.revoke_grace_s``)
    grace: float = DEFAULT_REVOKE_GRACE_S
    # serve: ``off``; ``on`` (each job's gpu_milli/1000 of the GPU's memory) or MiB
    mem_cap: str = "off"

    @property
    def mode(self) -> AntiThrashing:
        return AntiThrashing.parse(self.anti_thrashing)

    @property
    def mem_cap_share(self) -> bool:
        """Cap each job at its gpu_milli/1000 of the GPU's memory."""
        return self.mem_cap.strip().lower() in ON_WORDS

    @property
    def mem_cap_mib(self) -> float | None:
        """Or at this many MiB (None: no fixed cap)."""
        word = self.mem_cap.strip().lower()
        return None if word in ON_WORDS + OFF_WORDS else float(word)

    def __post_init__(self) -> None:
        self.mode  # noqa: B018 - raises ValueError on a word the lock does not know
        if not (math.isfinite(self.tq) and self.tq > 0):
            raise ValueError("tq must be a positive number of seconds")
        if self.jobs_per_gpu < 1:
            raise ValueError("jobs_per_gpu must be >= 1")
        if not (math.isfinite(self.grace) and self.grace >= 0):
            raise ValueError(f"grace must be a finite number of seconds >= 0, got {self.grace}")
        word = self.mem_cap.strip().lower()
        if word not in ON_WORDS + OFF_WORDS:
            try:
                mib = float(word)
            except ValueError:
                mib = math.nan
            if not (math.isfinite(mib) and mib > 0):
                raise ValueError(
                    f"mem_cap must be on, off or a number of MiB, got {self.mem_cap!r}"
                )


# Keys only one mode has a use for: the other refuses them.
SIMULATE_ONLY = ("jobs_per_gpu",)  # the simulator's admission of whole-GPU jobs
SERVE_ONLY = ("grace", "mem_cap")  # the share daemon's


def parse_nvshare(text: str, mode: Mode, flag: str = "--sharing") -> NvshareOptions:
    """``key=value,...`` of ``nvshare:...`` for ``mode``: its defaults (anti-thrashing's
    from ``mode_defaults``), and one ``InputError`` naming ``flag`` for a bad key or value
    or for a key the mode has no use for."""
    base = NvshareOptions(anti_thrashing=ANTI_THRASHING.of(mode))
    options = parse_options(
        NvshareOptions, text, what="nvshare option", flag=flag, aliases=NVSHARE_ALIASES, base=base
    )
    unused = SERVE_ONLY if mode is Mode.SIMULATE else SIMULATE_ONLY
    keys = {NVSHARE_ALIASES.get(key, key) for key, _ in split_options(text, "nvshare option", flag)}
    refused = [key for key in unused if key in keys]
    if refused:
        other = "serve" if mode is Mode.SIMULATE else "simulate"
        raise InputError(
            f"nvshare option {refused[0]!r} is {other}'s only: {mode.value} has no use for it",
            field=flag,
        )
    return options


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
        return SharingChoice("nvshare", nvshare=parse_nvshare(rest, Mode.SIMULATE))
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
