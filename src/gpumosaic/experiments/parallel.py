"""The one way sweeps start worker processes.

Workers come from a fork server, not a plain fork: forking a process that already runs
threads (BLAS pools, a progress bar's refresh thread) can leave a lock held forever in
the child, which hangs a sweep now and then. A fork server is forked once, early, from
a clean single-threaded process.
"""

from __future__ import annotations

import multiprocessing
from concurrent.futures import ProcessPoolExecutor


def process_pool(workers: int) -> ProcessPoolExecutor:
    return ProcessPoolExecutor(
        max_workers=max(1, workers), mp_context=multiprocessing.get_context("forkserver")
    )
