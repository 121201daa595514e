"""Gavel's round mechanism as a decision without a clock: ``RoundDecider``.

The decider owns what the mechanism decides with: the jobs it knows (``JobStore``), the
allocation in force and its accounting (``AllocationBook``: the policy, entities,
priorities, deficits) and the leases on a ``ClusterState`` (``LeaseBook``: placement,
lease extension). It never reads a clock: every call carries ``now``. A driver
(the simulator in ``mechanisms/rounds/sim``, or a live service) calls it in this order::

    decider.admit(job, rates)           # for every job that arrived by `now`
    plan = decider.plan(now)            # solve if due, choose entities, place them
    ...run plan.entries for at most round_s (each member at most its granted steps)...
    done = decider.report(plan, RoundReport(...))  # measured progress of the round
    decider.observe_rate(row, type_index, steps_per_s)  # each rate the round measured
    # nothing placed and nothing else will arrive? decider.solve(now) forces a solve

A live driver (the round service on Ray) calls exactly this object each round: it starts
or extends the leases of ``plan.entries`` (node, GPU indices, milli per GPU), lets each
job run its granted steps, and feeds back the steps each job reports and the time it
ran; the simulator feeds the same values from a progress model (rates x time).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from types import ModuleType
from typing import Any

import numpy as np

from gpumosaic.fallbacks import Fallback, Fallbacks
from gpumosaic.kernel_cache import resolve
from gpumosaic.mechanisms.admission import ever_fits
from gpumosaic.mechanisms.rounds.allocation import AllocationBook
from gpumosaic.mechanisms.rounds.estimation import ThroughputEstimation
from gpumosaic.mechanisms.rounds.jobs import JobStore
from gpumosaic.mechanisms.rounds.leases import LeaseBook, RestArguments
from gpumosaic.mechanisms.rounds.policy_input import DEFAULT_PAIR_PARTNERS
from gpumosaic.mechanisms.rounds.priorities import EntityTable, select_entity_arrays
from gpumosaic.model.cluster import ClusterSpec
from gpumosaic.model.gpu import MILLI_PER_GPU
from gpumosaic.model.job import JobSpec
from gpumosaic.model.plan import PlannedEntity
from gpumosaic.model.state import Assignment, ClusterState
from gpumosaic.placement.base import PlacementStrategy
from gpumosaic.policies.base import Policy, TypeOrder
from gpumosaic.results.outcome import Rejection, RejectReason
from gpumosaic.types import BoolArray, FloatArray, IntArray
from gpumosaic.workloads.throughputs import Throughputs

_CPU_ONLY = "the rounds schedule GPU jobs only (num_gpu=0)"
_NO_THROUGHPUT = "no GPU model of the cluster gives it a throughput"

# ``plan_arrays``' result: entity, type, rows a and b, rates a and b, steps a and b, and
# whether any entity is a pair.
PlanArrays = tuple[
    IntArray, IntArray, IntArray, IntArray, FloatArray, FloatArray, FloatArray, FloatArray, bool
]
_NONE, _EMPTY = np.zeros(0, dtype=np.int64), np.zeros(0)
_NO_PLAN: PlanArrays = (_NONE, _NONE, _NONE, _NONE, _EMPTY, _EMPTY, _EMPTY, _EMPTY, False)


@dataclass(frozen=True, slots=True)
class RoundConfig:
    round_s: float = 360.0
    resolve_interval_s: float = 1920.0
    span_nodes: bool = True  # a multi-GPU job may span nodes (Gavel's one-GPU servers)
    pair_partners: int = DEFAULT_PAIR_PARTNERS  # candidate partners per job when packing
    symmetric_fast_path: bool = True  # see leases: identical one-GPU nodes

    def __post_init__(self) -> None:
        if self.round_s <= 0:
            raise ValueError("round_s must be > 0")
        if self.resolve_interval_s < 0:
            raise ValueError("resolve_interval_s must be >= 0")


@dataclass(frozen=True, slots=True)
class RoundPlan:
    """What runs in the round that starts at ``now_s``: arrays over the placed entities
    (in priority order) for drivers that compute, and ``entries`` as values for readers."""

    now_s: float
    entity: IntArray  # index into the allocation's entity table
    type_index: IntArray
    rows_a: IntArray  # job rows of the first member
    rows_b: IntArray  # job rows of the second member, -1 for a single job
    rate_a: FloatArray  # planned steps/s of each member on its type (pair rates for pairs)
    rate_b: FloatArray
    steps_a: FloatArray  # steps granted to each member
    steps_b: FloatArray
    extended: BoolArray
    job_ids: tuple[tuple[int, ...], ...]  # per entity: one id, or two for a pair
    gpu_types: tuple[str, ...]  # per entity
    parts: tuple[tuple[Assignment, ...], ...]  # per entity: where it holds GPUs
    described: bool = True  # False: only the arrays (a driver that asked for no values)
    has_pairs: bool = True  # some entity is a packed pair (False: ``rows_b`` is all -1)

    def __len__(self) -> int:
        return len(self.entity)

    @property
    def jobs_running(self) -> int:
        if not self.has_pairs:
            return len(self.entity)
        return len(self.entity) + int((self.rows_b >= 0).sum())

    @property
    def entries(self) -> tuple[PlannedEntity, ...]:
        if not self.described:
            raise ValueError("this plan has arrays only: build the RoundDecider with describe=True")
        out = []
        for i, ids in enumerate(self.job_ids):
            two = len(ids) == 2
            steps = (float(self.steps_a[i]),) + ((float(self.steps_b[i]),) if two else ())
            rates = (float(self.rate_a[i]),) + ((float(self.rate_b[i]),) if two else ())
            out.append(
                PlannedEntity(
                    ids, self.gpu_types[i], self.parts[i], bool(self.extended[i]), steps, rates
                )
            )
        return tuple(out)


@dataclass(frozen=True, slots=True)
class RoundReport:
    """What happened in a round, per plan entry: the driver's measured (or modelled)
    progress. ``finish_*`` is when each member did its last step of the round, ``ran_s``
    how long each entity ran, ``end_s`` when the last lease of the round was given back."""

    end_s: float
    ran_s: FloatArray
    steps_a: FloatArray
    steps_b: FloatArray  # 0 for single jobs
    finish_a: FloatArray
    finish_b: FloatArray  # ignored for single jobs


@cache
def round_kernel() -> ModuleType:
    """The compiled round arithmetic (``round_kernel``), imported on first use (numba's
    import is not free; an import statement per call costs a microsecond a round)."""
    from gpumosaic.mechanisms.rounds import round_kernel as kernel

    return kernel


class RoundDecider:
    """The per-round decisions of Gavel's mechanism (see the module doc)."""

    def __init__(
        self,
        cluster: ClusterSpec,
        policy: Policy,
        placement: PlacementStrategy,
        throughputs: Throughputs,
        config: RoundConfig,
        shuffle_rng: np.random.Generator,
        place_rng: np.random.Generator,
        describe: bool = True,
        estimation: ThroughputEstimation | None = None,
    ) -> None:
        """``describe``: plans carry their entries as values (job ids, GPU type, where);
        a simulator that reads only the arrays turns it off (one Python step less per
        entity and round). ``estimation``: jobs may come with unknown (NaN) rates, which
        it profiles and estimates (``mechanisms/rounds/estimation.py``); without it
        every rate must be known."""
        self.describe = describe
        self.estimation = estimation
        self.config = config
        self.policy = policy
        self.throughputs = throughputs
        traits = policy.traits
        self.fixed_order = traits.type_order is TypeOrder.FIXED
        self.skip_zero_priority = traits.skips_zero_priority
        self.shuffle_rng = shuffle_rng
        self.models = cluster.gpu_models
        self.type_names = tuple(m.name for m in self.models)
        self.state = ClusterState(cluster)
        self.leases = LeaseBook(
            self.state,
            placement,
            self.type_names,
            place_rng,
            config.span_nodes,
            config.symmetric_fast_path,
        )
        per_model = cluster.gpus_per_model()
        self.capacity_gpus = np.array([float(per_model[n]) for n in self.type_names])
        self.capacity_milli = self.capacity_gpus.astype(np.int64) * MILLI_PER_GPU
        self._type_order = np.arange(len(self.models), dtype=np.int64)
        self._alive = np.ones(0, dtype=bool)
        self.jobs = JobStore(len(self.models))
        self.book = AllocationBook(
            policy, self.models, self.capacity_gpus, config.round_s, config.pair_partners
        )
        self.need_solve = False
        # ``_plan_one_pass``: what its arguments were built for (entity table, lease book
        # arrays, active flags), and the arguments.
        self._one_pass_key: tuple[object, ...] = (None, None, None)
        self._one_pass_args: tuple[tuple[object, ...], tuple[object, ...], tuple[np.ndarray, ...]]
        self._round_singles: Callable[..., Any] | None = None  # resolved for those types

    # ---- jobs ------------------------------------------------------------------------

    def admit(self, job: JobSpec, rates: FloatArray, measured: bool = True) -> int:
        """Add an arrived job with its isolated steps/s per GPU type; returns its row.
        A job that can never run is rejected with a reason (``jobs.rejected``)."""
        rates = np.asarray(rates, dtype=np.float64)
        return int(self.admit_many([job], rates[None, :], [measured])[0])

    def admit_many(
        self, jobs: Sequence[JobSpec], rates: FloatArray, measured: Sequence[bool]
    ) -> IntArray:
        """``admit`` for jobs in arrival order, with their (len(jobs), n_types) rates, in
        one pass over arrays; returns their rows. NaN rates are unknown: the estimation
        fills them (a ValueError without one)."""
        if self.estimation is not None:
            rates = self.estimation.admit(len(self.jobs), jobs, rates)
        elif len(rates) and np.isnan(rates).any():
            raise ValueError("unknown (NaN) rates need the decider's throughput estimation")
        rows = self.jobs.add_many(jobs, rates, measured)
        runnable: list[bool] = list(np.any(rates > 0, axis=1).tolist())
        admitted: list[int] = []
        for i, (row, job) in enumerate(zip(rows.tolist(), jobs, strict=True)):
            if job.num_gpu == 0:
                self.jobs.reject(row, Rejection(RejectReason.CPU_ONLY, _CPU_ONLY))
            elif (refusal := self._admission(job, rates[i])) is not None:
                self.jobs.reject(row, refusal)
            elif not runnable[i]:
                self.jobs.reject(row, Rejection(RejectReason.NO_THROUGHPUT, _NO_THROUGHPUT))
            else:
                admitted.append(row)
                continue
            if self.estimation is not None:
                self.estimation.drop(row)
        if admitted:
            self.jobs.activate_many(admitted)
            self.need_solve = True
        return rows

    def _admission(self, job: JobSpec, rates: FloatArray) -> Rejection | None:
        """The one admission rule (``mechanisms/admission.py``): the rounds span servers
        (``RoundConfig.span_nodes``) on the GPU models that give the job a speed."""
        usable = None  # the nodes of the models with a speed (type order = model order)
        if job.may_span_nodes and not self.state.fits_when_empty(job):
            usable = (np.asarray(rates) > 0)[self.state.node_model]
        why = "spanning servers is off (RoundConfig.span_nodes)"
        return ever_fits(
            self.state, job, spans=self.config.span_nodes, usable=usable, why_not_span=why
        )

    @property
    def has_active_jobs(self) -> bool:
        return self.jobs.n_active > 0

    # ---- the policy ------------------------------------------------------------------

    def solve_due(self, now: float) -> bool:
        """A solve is due when jobs came or went, at most once per resolve interval; and,
        as Gavel's ``_last_reset_time == 0``, at any change while the run's first reset
        is the last one. Gavel's simulator makes that first reset at time 0; a live
        service makes it a launch latency after its clock's origin, so the rule reads
        "the first reset", not "time 0" (with "time 0" the live service re-solved for
        no arrival until a whole interval after its first round)."""
        if self.estimation is not None and self.estimation.solve_wanted:
            return True  # a profiling job measured a model: profile it on the next
        if not self.need_solve:
            return False
        book = self.book
        first = book.first_reset_s
        if first is None or book.last_reset_s == first:
            return True
        return now - book.last_reset_s >= self.config.resolve_interval_s

    def solve(self, now: float) -> None:
        """Re-solve the policy for the active jobs now (a driver forces this when nothing
        can run and nothing else will arrive, as Gavel does)."""
        estimation = self.estimation
        adjust = None
        if estimation is not None:
            adjust = estimation.profile_entities
            estimation.solved()
        self.book.solve(now, self.jobs, self.throughputs, adjust)
        self.need_solve = False

    def observe_rate(self, row: int, type_index: int, steps_per_s: float) -> None:
        """A measured rate replaces the estimate; the next solve uses it (and only then the
        step budgets, which come from the allocation's entity table). With estimation, a
        job with unknown rates gets its other estimates redone from it.

        A measurement does not itself ask for a solve: Gavel's physical mode folds it into
        the rates the next solve reads and solves on arrivals, completions and new workers
        only (its scheduler sets ``_need_to_update_allocation`` there, never in
        ``_update_throughput``), so the live service plans as the simulator does. A job
        being profiled is the exception: each model it measures changes what the policy
        may give it (``estimation.solve_wanted``)."""
        if not 0 < steps_per_s < float("inf"):
            return
        jobs = self.jobs
        estimation = self.estimation
        new = None if estimation is None else estimation.observe(row, type_index, steps_per_s)
        if new is not None:
            jobs.rates[row] = new
        else:
            jobs.rates[row, type_index] = steps_per_s

    # ---- one round -------------------------------------------------------------------

    def plan(self, now: float) -> RoundPlan:
        """Solve if due, choose the entities most behind their allocation, place them."""
        planned = self._plan_round(now)
        if self.estimation is not None:
            self.estimation.note_plan(planned.rows_a, planned.rows_b, planned.type_index)
        return planned

    def _plan_round(self, now: float) -> RoundPlan:
        if self.solve_due(now):
            self.solve(now)
        ent = self.book.entities
        jobs = self.jobs
        active = jobs.is_active
        if ent is None or not jobs.n_active:
            empty = np.zeros(0, dtype=np.int64)
            self.leases.start_round(empty, empty, empty, jobs.specs, active)
            return self._plan_of(now, _NO_PLAN)
        if self.fixed_order:
            order = self._type_order
        else:
            order = self.shuffle_rng.permutation(len(self.models))
        if self.leases.one_pass_ready():
            planned, es, ts = self._plan_one_pass(now, ent, order, active)
            if planned is not None:
                return planned
            # The kernel chose (``es``, ``ts``) and changed nothing else: the general path.
            placed, extended = self.leases.start_round(
                ent.rows_a[es], ent.rows_b[es], ts, jobs.specs, active, one_pass=False
            )
        else:
            es, ts = select_entity_arrays(
                ent, self._all_alive(ent.size), order, self.capacity_milli,
                self.skip_zero_priority, active,
            )  # fmt: skip
            placed, extended = self.leases.start_round(
                ent.rows_a[es], ent.rows_b[es], ts, jobs.specs, active
            )
        if not len(placed):
            return self._plan_of(now, _NO_PLAN)
        arrays = round_kernel().plan_arrays(
            es, ts, placed, ent.rows_a, ent.rows_b, ent.rate_a, ent.rate_b,
            jobs.total_steps, jobs.done_steps, self.config.round_s,
        )  # fmt: skip
        return self._plan_of(now, arrays, extended)

    def _plan_one_pass(
        self, now: float, ent: EntityTable, order: IntArray, active: BoolArray
    ) -> tuple[RoundPlan | None, IntArray, IntArray]:
        """The round in one compiled call (``round_kernel.round_singles``: choice, lease
        start, plan arrays) while every lease is a row of the state; entities for the
        placement strategy are placed after it. Returns the plan, or None (the general
        path starts the round: a pair or a gang was chosen) with the choice."""
        leases, jobs = self.leases, self.jobs
        started_at = time.perf_counter()
        book_arrays = leases.one_pass_arrays(len(active), jobs.specs)
        key = self._one_pass_key
        if key[0] is not ent or key[1] is not book_arrays or key[2] is not active:
            self._one_pass_args = self._one_pass_arguments(ent, book_arrays, active)
            self._one_pass_key = (ent, book_arrays, active)
            self._round_singles = None
        head, tail, scratch = self._one_pass_args
        round_singles = self._round_singles
        if round_singles is None:  # resolved once for the types of these arguments
            round_singles = resolve(round_kernel().round_singles, order, *head, *tail)
            self._round_singles = round_singles
        count, counts, arrays, planned = round_singles(order, *head, *tail)
        chosen, chosen_type, extended, got, out_extended, rest = scratch

        def rest_of() -> RestArguments:
            es = chosen[:count]
            return (
                ent.rows_a[es], ent.rows_b[es], chosen_type[:count], jobs.specs,
                extended[:count], got[:count], rest,
            )  # fmt: skip

        done = leases.one_pass_done(counts, rest_of)
        leases.seconds += time.perf_counter() - started_at
        if planned:
            m = len(arrays[0])
            return self._plan_of(now, arrays, out_extended[:m].copy()), chosen, chosen_type
        es, ts = chosen[:count], chosen_type[:count]
        if done is None:
            return None, es, ts
        assert done is not True
        placed, placed_extended = done
        if not len(placed):
            return self._plan_of(now, _NO_PLAN), es, ts
        arrays = round_kernel().plan_arrays(
            es, ts, placed, ent.rows_a, ent.rows_b, ent.rate_a, ent.rate_b,
            jobs.total_steps, jobs.done_steps, self.config.round_s,
        )  # fmt: skip
        return self._plan_of(now, arrays, placed_extended), es, ts

    def _one_pass_arguments(
        self, ent: EntityTable, book_arrays: tuple[np.ndarray, ...], active: BoolArray
    ) -> tuple[tuple[object, ...], tuple[object, ...], tuple[np.ndarray, ...]]:
        """``round_singles``' arguments after the type order, and its scratch arrays: the
        same objects while the entity table, the lease book's arrays and the job store's
        stay (a solve, or growth, makes new ones)."""
        size = ent.size
        ints = np.empty((4, size), dtype=np.int64)
        flags = np.empty((3, size), dtype=bool)
        chosen, chosen_type, rest, out_placed = ints
        extended, got, out_extended = flags
        jobs = self.jobs
        head = (
            ent.x, ent.time, ent.tie_orders(), ent.type_total, ent.runnable_mask,
            ent.demand_milli, ent.rows_a, ent.rows_b, self._all_alive(size), active,
            self.capacity_milli, self.skip_zero_priority, chosen, chosen_type,
            np.zeros(len(active), dtype=bool),
        )  # fmt: skip
        tail = (
            *book_arrays, extended, got, rest, out_placed, out_extended, ent.rate_a,
            ent.rate_b, jobs.total_steps, jobs.done_steps, self.config.round_s,
        )  # fmt: skip
        return head, tail, (chosen, chosen_type, extended, got, out_extended, rest)

    def _plan_of(
        self, now: float, arrays: PlanArrays, extended: BoolArray | None = None
    ) -> RoundPlan:
        """The plan of the placed entities' arrays (``plan_arrays``' result) and whether
        each was extended (None: no entity)."""
        es, ts, rows_a, rows_b, rate_a, rate_b, steps_a, steps_b, pairs = arrays
        if extended is None:
            extended = np.zeros(0, dtype=bool)
        ids: tuple[tuple[int, ...], ...] = ()
        type_names: tuple[str, ...] = ()
        parts: tuple[tuple[Assignment, ...], ...] = ()
        if self.describe and len(es):  # values for readers; the simulator reads the arrays
            jobs = self.jobs
            ids_a = jobs.job_id[rows_a].tolist()
            if pairs:
                ids_b = jobs.job_id[np.maximum(rows_b, 0)].tolist()
                ids = tuple(
                    (x,) if p < 0 else (x, y)
                    for x, y, p in zip(ids_a, ids_b, rows_b.tolist(), strict=True)
                )
            else:
                ids = tuple(zip(ids_a))  # one-tuples, built in C
            type_names = tuple(np.array(self.type_names, dtype=object)[ts])
            parts = self.leases.parts_of(rows_a, rows_b)
        return RoundPlan(
            now, es, ts, rows_a, rows_b, rate_a, rate_b, steps_a, steps_b, extended, ids,
            type_names, parts, self.describe, pairs,
        )  # fmt: skip

    def _all_alive(self, size: int) -> BoolArray:
        """Every entity alive (the choice tests each member's row for being active)."""
        if len(self._alive) != size:
            self._alive = np.ones(size, dtype=bool)
        return self._alive

    def report(self, plan: RoundPlan, report: RoundReport) -> list[tuple[int, float]]:
        """Account the round of ``plan``; returns (row, finish time) of the jobs that
        finished, in plan order (first members, then second members of pairs). One
        compiled pass (``report_kernel.account_round``)."""
        ent = self.book.entities
        assert ent is not None
        jobs = self.jobs
        n = len(plan.entity)
        done_rows = np.empty(2 * n, dtype=np.int64)
        done_at = np.empty(2 * n)
        done = round_kernel().account_round(
            plan.entity, plan.type_index, plan.rows_a, plan.rows_b, report.ran_s,
            report.steps_a, report.steps_b, report.finish_a, report.finish_b, plan.now_s,
            report.end_s, ent.time, ent.type_total, jobs.total_steps, jobs.done_steps,
            jobs.demand_milli, jobs.attained_s, jobs.milli_s, jobs.start_s, jobs.first_type,
            done_rows, done_at,
        )  # fmt: skip
        if not done:
            return []
        rows, at = done_rows[:done].tolist(), done_at[:done].tolist()
        self.jobs.complete(rows, at)
        self.leases.forget(rows)
        self.need_solve = True
        return list(zip(rows, at, strict=True))

    def fallbacks(self) -> Fallbacks:
        """The policy's fallbacks and the entities that found no GPUs, so far."""
        failed = Fallbacks.of(Fallback.PLACEMENT_FAILED, self.leases.failures)
        return self.book.fallbacks + failed

    def release_all(self) -> None:
        """Give back every lease (the end of a run)."""
        self.leases.release_all()
