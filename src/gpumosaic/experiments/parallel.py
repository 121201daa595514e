"""The one parallel map: every sweep, reproduction and comparison runs its points here.

Workers come from a fork server, not a plain fork: forking a process that already runs
threads (BLAS pools, a progress bar's refresh thread) can leave a lock held forever in
the child, which hangs a sweep now and then. A fork server is forked once, early, from
a clean single-threaded process.

Ctrl-C: the workers ignore SIGINT (a terminal sends it to the whole process group) and
the parent, on KeyboardInterrupt, cancels what has not started and terminates the
workers at once, instead of waiting for every queued point as the executor's ``with``
block would. Results already handed to ``on_done`` stay. (A command that must resume
after Ctrl-C stores each run as it ends through the study executor:
experiments/study/execute.py.)
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")

# Called after each result, in the order results arrive: (results so far, total, result).
OnDone = Callable[[int, int, R], None]

# How long the parent waits for a result before it looks again: a bound on how late it
# notices a signal that Python delivers only between waits.
_POLL_S = 0.2


def default_workers() -> int:
    """The CPUs this process may run on."""
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1)


def _ignore_sigint() -> None:
    """Workers leave Ctrl-C to the parent (which stops them)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


# Ctrl-C ends workers that may be mid-way through a queue operation; multiprocessing's
# resource tracker (a process of its own, started with the pool) then warns at its end
# about a semaphore already removed, after the command's one "interrupted" line. It
# takes its warning filters from this process's -W options when it starts.
_TRACKER_QUIET = "ignore::UserWarning:multiprocessing.resource_tracker"


def process_pool(workers: int) -> ProcessPoolExecutor:
    if _TRACKER_QUIET not in sys.warnoptions:
        sys.warnoptions.append(_TRACKER_QUIET)
    return ProcessPoolExecutor(
        max_workers=max(1, workers),
        mp_context=multiprocessing.get_context("forkserver"),
        initializer=_ignore_sigint,
    )


def stop_pool(pool: ProcessPoolExecutor) -> None:
    """End the workers now and cancel the queued work (a running point is lost; the
    results already returned are not). The workers are ended first: ``shutdown`` forgets
    them, and the executor's exit hook would then wait for their running points."""
    # The executor has no public way to end running workers before Python 3.14.
    # Its feeder thread must not wait to flush work into a pipe no worker will read
    # (the executor's manager thread joins it, holding the lock ``shutdown`` takes).
    call_queue = getattr(pool, "_call_queue", None)
    if call_queue is not None:
        call_queue.cancel_join_thread()
    processes = list((getattr(pool, "_processes", None) or {}).values())
    for process in processes:
        if process.is_alive():
            process.terminate()
    for process in processes:
        process.join(1.0)
        if process.is_alive():
            process.kill()
            process.join(5.0)
    manager = getattr(pool, "_executor_manager_thread", None)
    results = getattr(pool, "_result_queue", None)
    pool.shutdown(wait=False, cancel_futures=True)
    # A worker ended while it sent a result leaves the manager thread waiting for the
    # rest of the message, for ever (and the interpreter's exit hook joins that thread).
    # With every worker gone, this process holds the pipe's last writing end: closing
    # it ends that read (EOF), and the thread ends as for a broken pool.
    writer = getattr(results, "_writer", None)
    if writer is not None:
        writer.close()
    if manager is not None:
        # It ends once it has seen the workers gone. The interpreter's exit hook would
        # wake it through a pipe it may have closed meanwhile (CPython 3.11 then prints an
        # EBADF traceback at exit): take it out of the hook once it has ended.
        manager.join(5.0)
        if not manager.is_alive():
            import concurrent.futures.process as process_module

            getattr(process_module, "_threads_wakeups", {}).pop(manager, None)


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
    function and plain values. Ctrl-C ends the workers and raises KeyboardInterrupt."""
    total = len(items)
    results: dict[int, R] = {}
    todo = list(range(total))

    def arrived(i: int, result: R) -> None:
        results[i] = result
        if on_done is not None:
            on_done(len(results), total, result)

    if workers <= 1 or len(todo) <= 1:
        for i in todo:
            arrived(i, fn(items[i]))
    else:
        _run_in_pool(fn, items, todo, workers, arrived)
    return [results[i] for i in range(total)]


def _run_in_pool(
    fn: Callable[[T], R],
    items: Sequence[T],
    todo: list[int],
    workers: int,
    arrived: Callable[[int, R], None],
) -> None:
    # Ctrl-C sets a flag that the loop checks between short waits: a KeyboardInterrupt
    # raised inside ``wait`` itself can leave a future's lock held, and the executor's
    # exit hook then waits forever for its manager thread.
    stop = threading.Event()
    previous = None
    if threading.current_thread() is threading.main_thread():
        previous = signal.getsignal(signal.SIGINT)
        if previous is signal.SIG_IGN:  # started with Ctrl-C ignored: leave it so
            previous = None
        else:
            signal.signal(signal.SIGINT, lambda _signum, _frame: stop.set())
    pool = process_pool(min(workers, len(todo)))
    try:
        futures: dict[Future[R], int] = {pool.submit(fn, items[i]): i for i in todo}
        pending = set(futures)
        while pending:
            if stop.is_set():
                raise KeyboardInterrupt
            done, pending = wait(pending, timeout=_POLL_S, return_when=FIRST_COMPLETED)
            for future in done:
                arrived(futures[future], future.result())
        if stop.is_set():
            raise KeyboardInterrupt
    except BaseException:
        stop_pool(pool)
        raise
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)
    pool.shutdown(wait=True)
