"""``serve --sharing``'s grammar, plain Python (no Ray, no numpy): ``none`` or
``nvshare:tq=S[,anti_thrashing=auto][,grace=S][,mem_cap=on|off|MiB]`` with the share
daemon's own bounds (``limits``). The service builds its share runtime from what
``parse_live_sharing`` returns (``runtime/share/supervisor.py``), and the ``serve`` command
checks the flag with it before anything heavy loads."""

from __future__ import annotations

from dataclasses import dataclass

from gpumosaic.errors import InputError
from gpumosaic.mode_defaults import ANTI_THRASHING
from gpumosaic.options import OFF_WORDS, ON_WORDS, parse_options
from gpumosaic.runtime.share import limits
from gpumosaic.sharing.lock import DEFAULT_TQ_S, NVSHARE_ALIASES, AntiThrashing
from gpumosaic.sharing.spec import split_spec

FLAG = "--sharing"


@dataclass(frozen=True, slots=True)
class LiveNvshareOptions:
    """The options of ``serve --sharing nvshare:...``. ``mem_cap``: ``off`` (default),
    ``on`` (each job's gpu_milli/1000 of the GPU's memory) or a number of MiB."""

    tq: float = DEFAULT_TQ_S
    # auto / on / off (AntiThrashing.parse, as simulate's); live default ``auto``,
    # simulated ``on`` (``mode_defaults.ANTI_THRASHING`` says why)
    anti_thrashing: str = ANTI_THRASHING.serve
    grace: float = limits.DEFAULT_REVOKE_GRACE_S
    mem_cap: str = "off"

    def __post_init__(self) -> None:
        AntiThrashing.parse(self.anti_thrashing)
        limits.tq_seconds(self.tq)
        limits.grace_seconds(self.grace)
        word = self.mem_cap.strip().lower()
        if word not in ON_WORDS + OFF_WORDS:
            try:
                mib = float(word)
            except ValueError:
                raise ValueError(
                    f"mem_cap must be on, off or a number of MiB, got {self.mem_cap!r}"
                ) from None
            limits.memory_mib(mib)

    @property
    def mem_cap_share(self) -> bool:
        """Cap each job at its gpu_milli/1000 of the GPU's memory."""
        return self.mem_cap.strip().lower() in ON_WORDS

    @property
    def mem_cap_mib(self) -> float | None:
        """Or at this many MiB (None: no fixed cap)."""
        word = self.mem_cap.strip().lower()
        return None if word in ON_WORDS + OFF_WORDS else float(word)


def parse_live_sharing(text: str | None) -> LiveNvshareOptions | None:
    """``None``, ``""`` or ``none``: no sharing; ``nvshare:key=value,...``: the runtime's
    options. Any other name or a bad option is one ``InputError`` naming ``--sharing``."""
    if text is None or text.strip().lower() in ("", "none"):
        return None
    name, rest = split_spec(text)
    if name != "nvshare":
        raise InputError(
            f"serve shares GPUs with nvshare:tq=S[,anti_thrashing=auto][,mem_cap=on] "
            f"or none, got {name!r}",
            field=FLAG,
        )
    return parse_options(
        LiveNvshareOptions, rest, what="nvshare option", flag=FLAG, aliases=NVSHARE_ALIASES
    )
