"""Placing many jobs at once, and re-placing only the jobs whose lease ends.

The entry points for a round mechanism (and any batch scheduler): ``place_many`` places a
list of jobs in order and applies each to the state; ``reconcile`` takes a round's wanted
set, keeps every held job that is wanted again (its lease continues: it is never
re-scored or moved), releases the rest and places the newcomers with ``place_many``.

Decisions are exactly those of a loop of ``strategy.place`` + ``state.allocate`` in the
same order (job i sees the cluster after jobs 0..i-1). What makes a batch cheap:

- a run of consecutive same-shape jobs goes to the strategy at once: a scored strategy
  places and allocates the whole run in one kernel call (Random, whose draws are
  Python's, places job by job);
- scored strategies keep per job shape the score of every node and re-score only the
  nodes whose state changed since that shape was last placed (``ScoredPlacement``); a run
  of same-shape jobs therefore re-scores one node per job, the one the last job took;
- within one batch resources only shrink, so once a job shape finds no node, every later
  job of that shape is unplaced without scoring (the filter key decides "same shape").
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

import numpy as np

from gpumosaic.model.job import JobSpec
from gpumosaic.model.state import Assignment, ClusterState
from gpumosaic.placement.base import PlacementStrategy
from gpumosaic.placement.filter import FilterKey, filter_key
from gpumosaic.placement.scorers.combined import ScoredPlacement


@dataclass(frozen=True, slots=True)
class BatchResult:
    """``placed``: assignments applied to the state, in placement order; ``unplaced``: jobs
    no node could hold at their turn (``placement.filter.explain`` says why)."""

    placed: tuple[Assignment, ...]
    unplaced: tuple[JobSpec, ...]


@dataclass(frozen=True, slots=True)
class Reconciled:
    """A round boundary: ``kept`` ids whose lease continues (untouched), ``released``
    assignments of held jobs not wanted again, and the batch that placed the rest."""

    kept: tuple[int, ...]
    released: tuple[Assignment, ...]
    batch: BatchResult


def place_many(
    strategy: PlacementStrategy,
    state: ClusterState,
    jobs: Sequence[JobSpec],
    rng: np.random.Generator,
    *,
    stop_at_first_failure: bool = False,
) -> BatchResult:
    """Place ``jobs`` in order, allocating each on ``state`` before the next is placed.

    ``stop_at_first_failure``: strict order (FIFO head-of-line): the first job that finds
    no node ends the batch; it and every later job are returned unplaced.
    """
    placed: list[Assignment] = []
    unplaced: list[JobSpec] = []
    failed: set[FilterKey] = set()
    keys = [filter_key(job) for job in jobs]
    start = 0
    while start < len(jobs):
        key = keys[start]
        end = start + 1
        while end < len(jobs) and keys[end] == key:
            end += 1
        run = jobs[start:end]
        got = [] if key in failed else place_run(strategy, state, run, rng)
        placed.extend(got)
        if len(got) < len(run):
            if stop_at_first_failure:
                unplaced.extend(jobs[start + len(got) :])
                break
            failed.add(key)
            unplaced.extend(run[len(got) :])
        start = end
    return BatchResult(tuple(placed), tuple(unplaced))


def place_run(
    strategy: PlacementStrategy,
    state: ClusterState,
    run: Sequence[JobSpec],
    rng: np.random.Generator,
) -> list[Assignment]:
    """Place a run of same-shape jobs in order, allocating each, up to the first that
    finds no node: in one compiled call where the strategy has one (``ScoredPlacement``)."""
    if isinstance(strategy, ScoredPlacement):
        return strategy.place_run(state, run, rng)
    placed: list[Assignment] = []
    for job in run:
        assignment = strategy.place(state, job, rng)
        if assignment is None:
            break
        state.allocate(assignment)
        placed.append(assignment)
    return placed


def reconcile(
    strategy: PlacementStrategy,
    state: ClusterState,
    wanted: Sequence[JobSpec],
    rng: np.random.Generator,
    *,
    held: Collection[int] | None = None,
) -> Reconciled:
    """Make ``state`` hold exactly the ``wanted`` jobs that fit.

    ``held``: the ids this caller placed earlier (default: every single-node job the
    state holds). A held job that is wanted again keeps its node and GPUs; a held job not
    wanted is released; wanted jobs not held are placed in the order given. A wanted job
    whose shape changed since it was placed (e.g. another GPU model) must be released by
    the caller first, or passed under a new id.
    """
    holding = set(state.assignments) if held is None else set(held)
    wanted_ids = {job.id for job in wanted}
    released = tuple(
        state.release(job_id)
        for job_id in sorted(holding - wanted_ids)
        if job_id in state.assignments
    )
    kept = tuple(job.id for job in wanted if job.id in holding and state.holds(job.id))
    newcomers = [job for job in wanted if not state.holds(job.id)]
    return Reconciled(kept, released, place_many(strategy, state, newcomers, rng))
