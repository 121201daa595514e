"""GPU models: memory and the idle/full power profile used by PWR and the energy metrics."""

from __future__ import annotations

from dataclasses import dataclass

from gpumosaic.errors import did_you_mean

MILLI_PER_GPU = 1000


@dataclass(frozen=True, slots=True)
class GpuModel:
    """One GPU model.

    ``throughput_key`` names the column of Gavel's throughput table that measures this
    model (``v100``, ``p100``, ``k80``), or ``None`` when the table has no measurement and
    throughputs must be estimated.
    """

    name: str
    memory_mib: int
    idle_w: float
    full_w: float
    throughput_key: str | None = None


# Power profiles from the PWR paper's tables (DESIGN.md): G2 uses the A10 profile and G3
# the A100 profile because their real models are undisclosed. K80 is Gavel's third type
# (per-GPU half of the dual-GPU board: 12 GiB, ~150 W TDP per GPU).
GPU_MODELS: dict[str, GpuModel] = {
    m.name.upper(): m
    for m in (
        GpuModel("V100", 16384, 30.0, 300.0, "v100"),
        GpuModel("V100M16", 16384, 30.0, 300.0, "v100"),
        GpuModel("V100M32", 32768, 30.0, 300.0, "v100"),
        GpuModel("P100", 16384, 25.0, 250.0, "p100"),
        GpuModel("K80", 12288, 20.0, 150.0, "k80"),
        GpuModel("T4", 15360, 10.0, 70.0, None),
        GpuModel("A10", 23028, 30.0, 150.0, None),
        GpuModel("A100", 40960, 50.0, 400.0, None),
        GpuModel("G2", 23028, 30.0, 150.0, None),
        GpuModel("G3", 40960, 50.0, 400.0, None),
    )
}


class UnknownGpuModelError(ValueError):
    """A GPU model name that gpumosaic has no profile for."""


def gpu_model(name: str) -> GpuModel:
    """Look a GPU model up by name, case-insensitively (``v100`` and ``V100`` are the same)."""
    try:
        return GPU_MODELS[name.strip().upper()]
    except KeyError:
        known = sorted(GPU_MODELS)
        hint = did_you_mean(name.strip(), known)
        raise UnknownGpuModelError(
            f"unknown GPU model {name!r}{hint} (known: {', '.join(known)})"
        ) from None
