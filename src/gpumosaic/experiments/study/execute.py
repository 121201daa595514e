"""Run a study: every planned run not yet in the store, in parallel, stored as it ends.

Runs are grouped in batches by their kind's ``batch_key`` (one run per batch for most
kinds); a batch runs in one worker: a process of the one parallel map
(``experiments.parallel``) or a Ray task. The parent process is the store's only writer,
and stores each batch as it comes back.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpumosaic.errors import InputError, Interrupted
from gpumosaic.experiments.results.store import ResultStore, input_fingerprint
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
    run_ids: tuple[str, ...]
    products: tuple[RunProduct, ...]
    error: str  # "" when it ran


@dataclass(frozen=True, slots=True)
class _Batch:
    kind: str
    run_ids: tuple[str, ...]
    points: tuple[Any, ...]


def run_batch(batch: _Batch) -> _BatchResult:
    """One batch in a worker. A user mistake the grid check could not see (it shows only
    once a run starts, e.g. a job list that is not there) fails this batch, not the study."""
    from gpumosaic.experiments.study.kinds.registry import run_kind

    try:
        products = tuple(run_kind(batch.kind).run(batch.points))
    except (InputError, ValueError) as err:
        return _BatchResult(batch.run_ids, (), str(err))
    return _BatchResult(batch.run_ids, products, "")


def execute(
    experiment: Experiment,
    out: Path,
    executor: str = "local",
    workers: int = 1,
    on_progress: Callable[[int, int], None] | None = None,
    announce: Callable[[str], None] | None = None,
) -> StudyOutcome:
    """Run what the store in ``out`` lacks; ``announce`` hears, before any run starts,
    how many stored runs a rerun reuses. Ctrl-C ends it with ``Interrupted`` (what is
    stored, and that the same command resumes)."""
    if executor not in EXECUTORS:
        raise InputError(f"must be one of {', '.join(EXECUTORS)}", field="--executor")
    started = time.perf_counter()
    store = ResultStore(out)
    store.save_experiment(experiment.text)
    planned = experiment.runs()
    try:  # Ctrl-C from here on (the reuse line included) says what is stored
        inputs = _fingerprints(planned)
        stored = store.finished()
        # A run stored from an older version of a file its point names runs again.
        finished = {i for i in stored if store.inputs(i) == inputs.get(i, "")}
        todo = [r for r in planned if r.run_id not in finished]
        stale = sum(1 for r in planned if r.run_id in stored - finished)
        if announce is not None and (len(todo) < len(planned) or stale):
            older = f" ({stale} stored from older input files run again)" if stale else ""
            announce(
                f"reusing {len(planned) - len(todo)} of {len(planned)} runs stored in {out}; "
                f"running the other {len(todo)}{older}"
            )
        batches = _batches(experiment, todo)
        failed: list[FailedRun] = []
        done = 0
        if on_progress:
            on_progress(0, len(todo))

        points = {r.run_id: r.point for r in todo}

        def collect(result: _BatchResult) -> None:
            nonlocal done
            if result.error:
                failed.extend(FailedRun(i, points[i], result.error) for i in result.run_ids)
            for run_id, product in zip(result.run_ids, result.products, strict=False):
                store.add(run_id, experiment.kind.name, product, inputs.get(run_id, ""))
            done += len(result.run_ids)
            if on_progress:
                on_progress(done, len(todo))

        if executor == "ray":
            _run_on_ray(batches, workers, collect)
        else:
            from gpumosaic.experiments.parallel import parallel_map

            parallel_map(run_batch, batches, workers, lambda _n, _total, result: collect(result))
    except KeyboardInterrupt:
        # What the folder holds now, read back (Ctrl-C may land between a run's files).
        planned_ids = {r.run_id for r in planned}
        kept = len(ResultStore(out).finished() & planned_ids)
        raise Interrupted(
            f"interrupted: {kept} of {len(planned)} runs are stored in {out}; run the same "
            "command again to run only the rest"
        ) from None
    if not todo:
        store.write_runs_table()  # a study with nothing left to run still has its table
    return StudyOutcome(
        planned=len(planned),
        skipped=len(planned) - len(todo),
        ran=done - len(failed),
        failed=tuple(failed),
        elapsed_s=time.perf_counter() - started,
    )


def _fingerprints(planned: list[PlannedRun]) -> dict[str, str]:
    """run id -> its point's input fingerprint (each distinct value looked at once)."""
    seen: dict[str, str] = {}
    return {run.run_id: input_fingerprint(run.point, seen) for run in planned}


def _batches(experiment: Experiment, todo: list[PlannedRun]) -> list[_Batch]:
    groups: dict[Any, list[PlannedRun]] = {}
    for run in todo:
        groups.setdefault(experiment.kind.batch_key(run.point), []).append(run)
    kind = experiment.kind.name
    return [
        _Batch(kind, tuple(r.run_id for r in runs), tuple(r.point for r in runs))
        for runs in groups.values()
    ]


def _run_on_ray(
    batches: list[_Batch], workers: int, collect: Callable[[_BatchResult], None]
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
        from gpumosaic.runtime.executors.ray_connect import init_local_ray

        init_local_ray(  # a local instance: loopback only
            num_cpus=max(1, workers), log_to_driver=False, configure_logging=False
        )
    try:
        remote = ray.remote(num_cpus=1)(run_batch)
        pending = [remote.remote(batch) for batch in batches]
        while pending:
            ready, pending = ray.wait(pending, num_returns=1)
            for ref in ready:
                collect(ray.get(ref))
    finally:
        if started_here:
            ray.shutdown()
