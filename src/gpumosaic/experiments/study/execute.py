"""Run a study: every planned run not yet in the store, in parallel, stored as it ends.

Runs are grouped in batches by their kind's ``batch_key`` (one run per batch for most
kinds); a batch runs in one worker: a process of the local pool (``experiments.pool``)
or a Ray task. The parent process is the store's only writer.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpumosaic.errors import InputError
from gpumosaic.experiments.results.store import ResultStore
from gpumosaic.experiments.study.file import Experiment, PlannedRun
from gpumosaic.experiments.study.kinds.base import RunProduct

EXECUTORS = ("local", "ray")


@dataclass(frozen=True, slots=True)
class FailedRun:
    run_id: str
    point: Any
    error: str


@dataclass(frozen=True, slots=True)
class StudyOutcome:
    planned: int
    skipped: int  # finished before: already in the store
    ran: int
    failed: tuple[FailedRun, ...]
    elapsed_s: float


@dataclass(frozen=True, slots=True)
class _BatchResult:
    products: tuple[RunProduct, ...]
    error: str  # "" when it ran


def run_batch(kind_name: str, points: Sequence[Any]) -> _BatchResult:
    """One batch in a worker. A user mistake the grid check could not see (it shows only
    once a run starts) fails this batch, not the study."""
    from gpumosaic.experiments.study.kinds.registry import run_kind

    try:
        return _BatchResult(tuple(run_kind(kind_name).run(points)), "")
    except (InputError, ValueError) as err:
        return _BatchResult((), str(err))


def execute(
    experiment: Experiment,
    out: Path,
    executor: str = "local",
    workers: int = 1,
    on_progress: Callable[[int, int], None] | None = None,
) -> StudyOutcome:
    if executor not in EXECUTORS:
        raise InputError(f"must be one of {', '.join(EXECUTORS)}", field="--executor")
    started = time.perf_counter()
    store = ResultStore(out)
    store.save_experiment(experiment.text)
    planned = experiment.runs()
    finished = store.finished()
    todo = [r for r in planned if r.run_id not in finished]
    batches = _batches(experiment, todo)
    failed: list[FailedRun] = []
    done = 0
    if on_progress:
        on_progress(0, len(todo))

    def collect(batch: list[PlannedRun], result: _BatchResult) -> None:
        nonlocal done
        if result.error:
            failed.extend(FailedRun(r.run_id, r.point, result.error) for r in batch)
        for planned_run, product in zip(batch, result.products, strict=False):
            store.add(planned_run.run_id, experiment.kind.name, product)
        done += len(batch)
        if on_progress:
            on_progress(done, len(todo))

    kind = experiment.kind.name
    if executor == "ray":
        _run_on_ray(kind, batches, workers, collect)
    elif workers <= 1 or len(batches) <= 1:
        for batch in batches:
            collect(batch, run_batch(kind, [r.point for r in batch]))
    else:
        from concurrent.futures import as_completed

        from gpumosaic.experiments.pool import process_pool

        with process_pool(min(workers, len(batches))) as pool:
            futures = {pool.submit(run_batch, kind, [r.point for r in b]): b for b in batches}
            for future in as_completed(futures):
                collect(futures[future], future.result())
    if not todo:
        store.write_runs_table()  # a study with nothing left to run still has its table
    return StudyOutcome(
        planned=len(planned),
        skipped=len(planned) - len(todo),
        ran=done - len(failed),
        failed=tuple(failed),
        elapsed_s=time.perf_counter() - started,
    )


def _batches(experiment: Experiment, todo: list[PlannedRun]) -> list[list[PlannedRun]]:
    groups: dict[Any, list[PlannedRun]] = {}
    for run in todo:
        groups.setdefault(experiment.kind.batch_key(run.point), []).append(run)
    return list(groups.values())


def _run_on_ray(
    kind: str,
    batches: list[list[PlannedRun]],
    workers: int,
    collect: Callable[[list[PlannedRun], _BatchResult], None],
) -> None:
    """Each batch a Ray task on the Ray instance this process is connected to, or on a
    local one started here (and stopped at the end)."""
    try:
        import ray
    except ImportError:
        raise InputError(
            "--executor ray needs Ray: pip install 'gpumosaic[ray]'", field="--executor"
        ) from None
    started_here = not ray.is_initialized()
    if started_here:
        ray.init(
            num_cpus=max(1, workers),
            include_dashboard=False,
            log_to_driver=False,
            configure_logging=False,
        )
    try:
        remote = ray.remote(num_cpus=1)(run_batch)
        pending = {remote.remote(kind, [r.point for r in b]): b for b in batches}
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1)
            for ref in ready:
                collect(pending.pop(ref), ray.get(ref))
    finally:
        if started_here:
            ray.shutdown()
