"""The registry of run kinds: the name an experiment file gives as ``kind``."""

from __future__ import annotations

from gpumosaic.experiments.study.kinds.base import RunKind
from gpumosaic.experiments.study.kinds.fill import FillKind
from gpumosaic.experiments.study.kinds.gandiva import GandivaKind
from gpumosaic.experiments.study.kinds.gavel import GavelKind
from gpumosaic.experiments.study.kinds.nvshare import NvshareKind
from gpumosaic.experiments.study.kinds.simulate import SimulateKind

KINDS: dict[str, RunKind] = {
    k.name: k for k in (SimulateKind(), FillKind(), GavelKind(), NvshareKind(), GandivaKind())
}
