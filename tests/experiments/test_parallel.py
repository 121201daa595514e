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
