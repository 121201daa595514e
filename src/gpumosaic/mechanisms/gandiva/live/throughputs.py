"""The speeds Gandiva starts from live: Gavel's table where it knows the job type (its
pairs are what packing judges before measuring), the rounds service's placeholder prior
elsewhere (a live job need not be one of Gavel's types; such a job is never packed,
since no pair of it is measured, but it is time-sliced and migrated)."""

from __future__ import annotations

from gpumosaic.model.gpu import GpuModel
from gpumosaic.model.job import JobSpec
from gpumosaic.workloads.throughputs import UNMEASURED_PRIOR_STEPS_PER_S, GavelThroughputTable


class LiveThroughputs(GavelThroughputTable):
    """``GavelThroughputTable`` whose ``rate`` falls back to the placeholder prior."""

    def rate(self, job: JobSpec, gpu: GpuModel) -> float:
        key, _factor = self.column(gpu)
        if key is not None and self.has(job.job_type, max(job.num_gpu, 1), key):
            return super().rate(job, gpu)
        return UNMEASURED_PRIOR_STEPS_PER_S
