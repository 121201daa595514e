"""What Gandiva's introspective packing needs to know about jobs: speeds alone and packed,
a GPU-utilization proxy for choosing whom to pack, and GPU memory working sets.

- Speeds: alone from the workload's throughputs; packed from Gavel's measured pairs
  (``GavelThroughputTable.packed``). A pair the table does not measure is never packed:
  Gandiva learns a pair's speed by running it, and we have nothing to replay.
- Utilization proxy, for "pack the lowest-utilization job onto the lowest-utilization GPU":
  ``gpu_time_fraction`` when the job declares one (< 1); otherwise how much speed the job
  loses when it shares, ``1 - mean_b(its packed rate beside b / its rate alone)`` over
  every partner b the table measures on that GPU type. A job that keeps its speed beside
  anyone leaves the GPU idle much of the time; one that halves needs the whole GPU.
  Since a pair's gain is the sum of the two members' retained speeds, the sum of two
  utilizations predicts ``2 - gain`` on average over partners -- a better predictor than
  a real profiler's utilization would be (it comes from the same table).
- Working sets: ``gpu_memory_mib`` when the job gives one, else a per-job-type estimate
  (below); a pair is packed only if both working sets fit in the GPU's memory together.
  Suspended jobs' memory lives in host memory, so time-slicing needs no such check.
"""

from __future__ import annotations

from collections.abc import Sequence

from gpumosaic.model.gpu import MILLI_PER_GPU, GpuModel
from gpumosaic.model.job import JobSpec
from gpumosaic.workloads.throughputs import GavelThroughputTable, Throughputs

# Peak GPU memory (MiB) of Gavel's job types in PyTorch, by batch size. Estimates from
# model size, optimizer state and activations at that batch size (ResNet-18 on CIFAR-10,
# ResNet-50 on ImageNet, Transformer on Multi30k, LM = 2-layer LSTM on Wikitext-2,
# Recommendation = autoencoder on ML-20M, A3C on Pong, CycleGAN on monet2photo); they
# decide which pairs fit on a 12 GiB K80 or a 16 GiB V100/P100, not speeds.
WORKING_SET_MIB: dict[str, int] = {
    "ResNet-18 (batch size 16)": 1100,
    "ResNet-18 (batch size 32)": 1300,
    "ResNet-18 (batch size 64)": 1700,
    "ResNet-18 (batch size 128)": 2400,
    "ResNet-18 (batch size 256)": 3800,
    "ResNet-50 (batch size 16)": 4000,
    "ResNet-50 (batch size 32)": 6000,
    "ResNet-50 (batch size 64)": 9500,
    "ResNet-50 (batch size 128)": 14500,
    "Transformer (batch size 16)": 2500,
    "Transformer (batch size 32)": 3500,
    "Transformer (batch size 64)": 5500,
    "Transformer (batch size 128)": 9000,
    "Transformer (batch size 256)": 14000,
    "A3C": 1000,
    "LM (batch size 5)": 1200,
    "LM (batch size 10)": 1400,
    "LM (batch size 20)": 1700,
    "LM (batch size 40)": 2300,
    "LM (batch size 80)": 3500,
    "Recommendation (batch size 512)": 1000,
    "Recommendation (batch size 1024)": 1200,
    "Recommendation (batch size 2048)": 1600,
    "Recommendation (batch size 4096)": 2400,
    "Recommendation (batch size 8192)": 4000,
    "CycleGAN": 4500,
}
DEFAULT_WORKING_SET_MIB = 4096
# A utilization proxy never reaches 0: even a tiny job costs its partner something.
MIN_UTILIZATION = 0.05


def working_set_mib(job: JobSpec) -> int:
    if job.gpu_memory_mib is not None:
        return job.gpu_memory_mib
    return WORKING_SET_MIB.get(job.job_type, DEFAULT_WORKING_SET_MIB)


class RateModel:
    """Speeds of single jobs and packed pairs on a GPU model; caches per job type."""

    def __init__(self, throughputs: Throughputs) -> None:
        self.throughputs = throughputs
        self._table = throughputs if isinstance(throughputs, GavelThroughputTable) else None
        self._utilization: dict[tuple[str, str], float] = {}

    @property
    def measures_pairs(self) -> bool:
        return self._table is not None

    def alone(self, job: JobSpec, gpu: GpuModel) -> float:
        return self.throughputs.rate(job, gpu)

    def unmeasured(self, job: JobSpec, models: Sequence[GpuModel]) -> str | None:
        """A GPU model the job may land on but has no throughput for, or None."""
        for model in models:
            if not job.allows(model.name):
                continue
            try:
                self.alone(job, model)
            except KeyError:
                return model.name
        return None

    def runs_on(self, job: JobSpec, models: Sequence[GpuModel]) -> list[bool]:
        """Per model: the job may use it and runs there at a positive speed. Gavel's table
        has speed 0 where a job does not fit (ResNet-50 at batch 128 on 2 K80s); a job
        placed there would never finish."""
        return [job.allows(m.name) and self.alone(job, m) > 0 for m in models]

    def pair(self, a: JobSpec, b: JobSpec, gpu: GpuModel) -> tuple[float, float] | None:
        """(rate of a, rate of b) when packed on one GPU; None if unmeasured."""
        if self._table is None or gpu.throughput_key is None:
            return None
        return self._table.packed(a.job_type, 1, b.job_type, 1, gpu.throughput_key)

    def pair_gain(self, a: JobSpec, b: JobSpec, gpu: GpuModel) -> float:
        """Sum of the pair's normalized throughputs (time-slicing the two gives 1)."""
        rates = self.pair(a, b, gpu)
        if rates is None:
            return 0.0
        return rates[0] / self.alone(a, gpu) + rates[1] / self.alone(b, gpu)

    def can_pack(self, a: JobSpec, b: JobSpec, gpu: GpuModel) -> bool:
        """Both single whole-GPU jobs, the pair measured, working sets fit together."""
        for job in (a, b):
            if job.num_gpu != 1 or job.gpu_milli != MILLI_PER_GPU:
                return False
        if working_set_mib(a) + working_set_mib(b) > gpu.memory_mib:
            return False
        rates = self.pair(a, b, gpu)
        return rates is not None and rates[0] > 0 and rates[1] > 0

    def utilization(self, job: JobSpec, gpu: GpuModel) -> float:
        """Gandiva's profiled GPU utilization of the job alone (proxy, see module doc)."""
        if job.gpu_time_fraction < 1.0:
            return max(MIN_UTILIZATION, job.gpu_time_fraction)
        key = (job.job_type, gpu.name)
        cached = self._utilization.get(key)
        if cached is None:
            cached = self._table_utilization(job.job_type, gpu)
            self._utilization[key] = cached
        return cached

    def _table_utilization(self, job_type: str, gpu: GpuModel) -> float:
        table = self._table
        if table is None or gpu.throughput_key is None:
            return 1.0
        key = gpu.throughput_key
        alone = table.isolated(job_type, 1, key) if table.has(job_type, 1, key) else 0.0
        retained: list[float] = []
        for other in table.job_types:
            rates = table.packed(job_type, 1, other, 1, key)
            if rates is not None and alone > 0:
                retained.append(rates[0] / alone)
        if not retained:
            return 1.0  # nothing measured: assume it fills the GPU
        return min(1.0, max(MIN_UTILIZATION, 1.0 - sum(retained) / len(retained)))
