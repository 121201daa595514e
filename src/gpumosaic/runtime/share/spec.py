"""``serve --sharing``'s grammar, plain Python (no Ray, no numpy): ``none`` or
``nvshare:tq=S[,anti_thrashing=auto][,grace=S][,mem_cap=on|off|MiB]``, read by the one
nvshare option class of simulate and serve (``sharing.spec.parse_nvshare``, serve's
defaults), then held to the share daemon's own bounds (``limits``). The service builds its
share runtime from what ``parse_live_sharing`` returns (``runtime/share/supervisor.py``),
and the ``serve`` command checks the flag with it before anything heavy loads."""

from __future__ import annotations

from gpumosaic.errors import InputError
from gpumosaic.mode_defaults import Mode
from gpumosaic.runtime.share import limits
from gpumosaic.sharing.spec import NvshareOptions, parse_nvshare, split_spec

FLAG = "--sharing"


def parse_live_sharing(text: str | None) -> NvshareOptions | None:
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
    options = parse_nvshare(rest, Mode.SERVE, flag=FLAG)
    try:  # the daemon's bounds, tighter than the model's (a real lock, real memory)
        limits.tq_seconds(options.tq)
        limits.grace_seconds(options.grace)
        if options.mem_cap_mib is not None:
            limits.memory_mib(options.mem_cap_mib)
    except ValueError as err:
        raise InputError(str(err), field=FLAG) from None
    return options
