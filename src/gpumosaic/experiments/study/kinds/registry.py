"""The registry of run kinds: the name an experiment file gives as ``kind``. A kind's
module is imported when the kind is first used (they pull in different simulators)."""

from __future__ import annotations

from importlib import import_module

from gpumosaic.experiments.study.kinds.base import RunKind

_PREFIX = "gpumosaic.experiments.study.kinds."
KINDS: dict[str, str] = {
    "simulate": "simulate:SimulateKind",
    "fill": "fill:FillKind",
    "gavel": "gavel:GavelKind",
    "nvshare": "nvshare:NvshareKind",
    "gandiva": "gandiva:GandivaKind",
}
_loaded: dict[str, RunKind] = {}


def run_kind(name: str) -> RunKind:
    """The kind called ``name`` (KeyError if there is none)."""
    if name not in _loaded:
        module, _, cls = KINDS[name].partition(":")
        _loaded[name] = getattr(import_module(_PREFIX + module), cls)()
    return _loaded[name]
