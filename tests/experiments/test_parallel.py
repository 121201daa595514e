"""The one parallel map: results in item order, inline for one worker, progress calls."""

from __future__ import annotations

import os

from gpumosaic.experiments.parallel import parallel_map


def square_and_pid(x: int) -> tuple[int, int]:
    return x * x, os.getpid()


def test_inline_with_one_worker_in_this_process() -> None:
    calls: list[tuple[int, int, tuple[int, int]]] = []
    out = parallel_map(square_and_pid, [3, 1, 2], 1, lambda d, t, r: calls.append((d, t, r)))
    assert [v for v, _ in out] == [9, 1, 4]
    assert {pid for _, pid in out} == {os.getpid()}
    assert [(d, t) for d, t, _ in calls] == [(1, 3), (2, 3), (3, 3)]


def test_workers_keep_item_order_and_report_every_result() -> None:
    items = list(range(7))
    done: list[int] = []
    out = parallel_map(square_and_pid, items, 2, lambda d, t, r: done.append(d))
    assert [v for v, _ in out] == [x * x for x in items]
    assert os.getpid() not in {pid for _, pid in out}  # ran in worker processes
    assert done == list(range(1, 8))


def sleep_long(x: int) -> int:
    import time

    time.sleep(600)  # far longer than any bound below: only stop_pool ends it
    return x


def test_stop_pool_ends_running_workers_at_once() -> None:
    """Ctrl-C must not wait for the points that are running (issue 36: 87 s): the
    workers are ended, not left to finish (``shutdown`` alone forgets them)."""
    import time

    from gpumosaic.experiments.parallel import process_pool, stop_pool

    pool = process_pool(2)
    futures = [pool.submit(sleep_long, i) for i in range(4)]
    deadline = time.monotonic() + 120
    while len(getattr(pool, "_processes", {}) or {}) < 2 or not any(f.running() for f in futures):
        assert time.monotonic() < deadline, "the workers did not start"
        time.sleep(0.05)
    workers = list(pool._processes.values())  # type: ignore[union-attr]
    stop_pool(pool)
    deadline = time.monotonic() + 60  # a bound for a loaded machine, not a timing claim
    while any(w.is_alive() for w in workers):
        assert time.monotonic() < deadline, f"workers still alive: {workers}"
        time.sleep(0.05)
    from concurrent.futures import wait

    _, not_done = wait(futures, timeout=60)  # cancelled or failed, none left running
    assert not not_done, not_done
