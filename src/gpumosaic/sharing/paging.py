"""Unified-memory paging physics: what a job pays when its working set is not on the GPU.

nvshare turns every allocation into CUDA managed memory, so a process whose pages were
evicted by a co-located process gets them back through GPU page faults over PCIe. Two
costs follow, both in seconds of stalled GPU work:

* **refill** (a hand-over, or a job coming back to a GPU another job used): the missing
  part of its working set comes back in one dense pass (the first iteration after the
  grant touches every page). Two things make that much cheaper than faulting every page
  one batch at a time, and both matter once a quantum is only a few refills long:

  - the UVM driver's density prefetcher (``uvm_perf_prefetch``, on by default since
    Pascal) migrates the rest of a 2 MiB block as one bulk copy once more than its
    threshold (51% by default) of the block has faulted; in a dense pass about half of
    the bytes therefore move at fault speed and the rest at copy speed;
  - PCIe is full duplex: the write-back of the pages the refill displaces (device to
    host) runs on the other direction while the faults stream in, so a refill costs the
    longer of the two transfers, not their sum.

  What stays resident matters too: the driver evicts only as much of the others' pages
  as the new holder's faults need room for, so a job whose working set stayed on the GPU
  (memory not full) pays nothing, and two big jobs keep ``M - ws`` of each other's;
* **thrashing** (several jobs computing at once whose working sets do not fit): the
  hardware time-slices the contexts every few milliseconds, so every job keeps finding part
  of its working set evicted. A job re-touches its whole working set once per *sweep*
  (one iteration of a training loop); the part that is not resident -- its share of the
  overflow -- is faulted in again on every sweep.

All sizes are MiB, bandwidths GB/s (10^9 bytes/s) as hardware sheets quote them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

MIB_PER_GB = 1e9 / 2**20  # 953.67 MiB in one GB (10^9 bytes)

# P100 on PCIe 3.0 x16: 15.75 GB/s raw, ~12 GB/s for large pinned copies.
PCIE3_X16_EFFECTIVE_GB_S = 12.0
# Demand paging moves data in fault batches that the driver services one after another
# (fault, migrate 64 KiB-2 MiB, map, replay); on Pascal it reaches roughly 40% of the
# link's copy bandwidth, which is why nvshare's README warns that a new holder needs "a
# few seconds" to fetch its data. Calibrated: with DEFAULT_SWEEP_S, the product
# fault_gb_s x sweep_s (1 GB per sweep) sets the thrashing rate and is pinned by the big
# "off" rows of the nvshare table (docs/sharing.md, "Parameters").
PASCAL_FAULT_GB_S = 5.0
# The UVM driver's density-prefetch threshold (nvidia-uvm module parameter
# uvm_perf_prefetch_threshold, default 51): once more than this share of a 2 MiB block has
# faulted in, the rest of the block is copied in bulk. A driver default, not a fit.
UVM_PREFETCH_THRESHOLD = 0.51
# One training iteration re-reads the weights and activations it keeps on the GPU:
# a sweep of the working set every ~0.2 s of GPU work (typical step time of the
# thesis's PyTorch/TensorFlow jobs on a P100). Calibrated together with PASCAL_FAULT_GB_S.
DEFAULT_SWEEP_S = 0.2


@dataclass(frozen=True, slots=True)
class PagingModel:
    """Bandwidths and access pattern that price refills and thrashing (see module doc)."""

    link_gb_s: float = PCIE3_X16_EFFECTIVE_GB_S
    fault_gb_s: float = PASCAL_FAULT_GB_S
    sweep_s: float = DEFAULT_SWEEP_S
    prefetch_threshold: float = UVM_PREFETCH_THRESHOLD

    def __post_init__(self) -> None:
        if self.link_gb_s <= 0 or self.fault_gb_s <= 0 or self.sweep_s <= 0:
            raise ValueError("link_gb_s, fault_gb_s and sweep_s must be > 0")
        if not 0.0 <= self.prefetch_threshold <= 1.0:
            raise ValueError("prefetch_threshold must be in [0, 1]")

    def refill_s(self, fetch_mib: float, evict_mib: float) -> float:
        """Seconds to bring ``fetch_mib`` back in one dense pass while ``evict_mib`` of other
        jobs' pages are written back to the host.

        The fetch: ``prefetch_threshold`` of it faults in at ``fault_gb_s``, the density
        prefetcher copies the rest at ``link_gb_s``. The write-back runs on the link's other
        direction at the same time (full duplex), so the refill lasts the longer of the two.
        """
        fetch = max(fetch_mib, 0.0)
        faulted = self.prefetch_threshold * fetch / (self.fault_gb_s * MIB_PER_GB)
        copied = (1.0 - self.prefetch_threshold) * fetch / (self.link_gb_s * MIB_PER_GB)
        write_back = max(evict_mib, 0.0) / (self.link_gb_s * MIB_PER_GB)
        return max(faulted + copied, write_back)

    def thrash_cost(self, working_sets_mib: Sequence[float], gpu_memory_mib: float) -> list[float]:
        """Extra GPU-seconds per solo GPU-second for each job of an overflowing running set.

        Under millisecond time-slicing no job can keep its pages, so memory ends up shared in
        proportion to the working sets: job i keeps ``M * ws_i / sum(ws)`` and misses the
        rest, ``miss_i``, once per sweep. Faulting it back takes ``miss_i / fault_bw`` per
        ``sweep_s`` of useful work, during which the GPU and the link serve nobody else.
        Zero for every job when the set fits.
        """
        total = sum(working_sets_mib)
        if total <= gpu_memory_mib or total <= 0:
            return [0.0 for _ in working_sets_mib]
        missing_share = 1.0 - gpu_memory_mib / total
        bandwidth = self.fault_gb_s * MIB_PER_GB
        return [ws * missing_share / bandwidth / self.sweep_s for ws in working_sets_mib]
