"""The one parallel map: every sweep, reproduction and comparison runs its points here.

Workers come from a fork server, not a plain fork: forking a process that already runs
threads (BLAS pools, a progress bar's refresh thread) can leave a lock held forever in
the child, which hangs a sweep now and then. A fork server is forked once, early, from
a clean single-threaded process.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")

# Called after each result, in the order results arrive: (results so far, total, result).
OnDone = Callable[[int, int, R], None]


def default_workers() -> int:
    """The CPUs this process may run on."""
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1)


def process_pool(workers: int) -> ProcessPoolExecutor:
    return ProcessPoolExecutor(
        max_workers=max(1, workers), mp_context=multiprocessing.get_context("forkserver")
    )


def parallel_map(
    fn: Callable[[T], R],
    items: Sequence[T],
    workers: int,
    on_done: OnDone[R] | None = None,
) -> list[R]:
    """``[fn(item) for item in items]``, on up to ``workers`` processes.

    Results come back in the order of ``items`` whatever order the workers finish in.
    ``workers <= 1`` or a single item runs in this process (no start-up cost, and a
    debugger or profiler sees the work). ``fn`` and the items must pickle: a module-level
    function and plain values."""
    total = len(items)
    if workers <= 1 or total <= 1:
        inline: list[R] = []
        for item in items:
            inline.append(fn(item))
            if on_done is not None:
                on_done(len(inline), total, inline[-1])
        return inline
    results: dict[int, R] = {}
    with process_pool(min(workers, total)) as pool:
        futures = {pool.submit(fn, item): i for i, item in enumerate(items)}
        for future in as_completed(futures):
            result = future.result()
            results[futures[future]] = result
            if on_done is not None:
                on_done(len(results), total, result)
    return [results[i] for i in range(total)]
