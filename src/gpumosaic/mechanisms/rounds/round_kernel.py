"""The compiled arithmetic of ``RoundDecider``'s round: the plan's arrays after placement
(``plan_arrays``: rows, rates and granted steps of the placed entities) and the round's
accounting (``account_round``), one pass each; a round of single jobs whose leases are all
rows of the state is chosen, started and planned in one call (``round_singles``).

Imported lazily (numba), like every kernel module; cached on disk (``kernel_cache``).
"""

from __future__ import annotations

import numpy as np

from gpumosaic.kernel_cache import njit
from gpumosaic.mechanisms.rounds.choice_kernel import choose
from gpumosaic.mechanisms.rounds.jobs import STEP_EPS
from gpumosaic.mechanisms.rounds.kernel import STARTED, start_singles
from gpumosaic.model.gpu import MILLI_PER_GPU


@njit(cache=True, inline="always")
def grant(rate, total_steps, done_steps, round_s):  # pragma: no cover
    """Steps a lease grants for one round: min(int(rate x round), remaining), as Gavel.
    A job slower than one step per round would never progress with int(): it gets a
    fraction of a step instead (never happens with Gavel's table)."""
    whole = np.floor(rate * round_s)
    per_round = whole if whole >= 1.0 else rate * round_s
    return min(per_round, total_steps - done_steps)


@njit(cache=True)
def grant_steps(rate, rows, total_steps, done_steps, round_s):  # pragma: no cover
    """``grant`` for each entry: ``rate[i]`` for job row ``rows[i]``."""
    out = np.empty(rate.shape[0])
    for i in range(rate.shape[0]):
        r = rows[i]
        out[i] = grant(rate[i], total_steps[r], done_steps[r], round_s)
    return out


@njit(cache=True)
def plan_arrays(
    chosen, types, placed, entity_rows_a, entity_rows_b, entity_rate_a, entity_rate_b,
    total_steps, done_steps, round_s,
):  # fmt: skip  # pragma: no cover
    """The placed entities' arrays (positions ``placed`` of the chosen ``chosen``/``types``):
    entity, type, member rows, rates on the type, steps granted (0 for a single job's
    absent second member), and whether any is a pair."""
    n = placed.shape[0]
    entity = np.empty(n, dtype=np.int64)
    type_index = np.empty(n, dtype=np.int64)
    rows_a = np.empty(n, dtype=np.int64)
    rows_b = np.empty(n, dtype=np.int64)
    rate_a = np.empty(n)
    rate_b = np.empty(n)
    steps_a = np.empty(n)
    steps_b = np.zeros(n)
    pairs = False
    for i in range(n):
        e = chosen[placed[i]]
        t = types[placed[i]]
        entity[i] = e
        type_index[i] = t
        a = entity_rows_a[e]
        b = entity_rows_b[e]
        rows_a[i] = a
        rows_b[i] = b
        rate_a[i] = entity_rate_a[e, t]
        rate_b[i] = entity_rate_b[e, t]
        steps_a[i] = grant(rate_a[i], total_steps[a], done_steps[a], round_s)
        if b >= 0:
            pairs = True
            steps_b[i] = grant(rate_b[i], total_steps[b], done_steps[b], round_s)
    return entity, type_index, rows_a, rows_b, rate_a, rate_b, steps_a, steps_b, pairs


@njit(cache=True, inline="always")
def _credit(row, steps, executed, held, t, now, job_start, first_type, done_steps, demand_milli,
            attained_s, milli_s):  # fmt: skip  # pragma: no cover
    done_steps[row] += steps
    demand = demand_milli[row]
    attained_s[row] += executed * demand / MILLI_PER_GPU
    milli_s[row] += demand * held
    if job_start[row] != job_start[row]:  # NaN: the job's first round
        job_start[row] = now
        first_type[row] = t


@njit(cache=True, inline="always")
def _finished(row, total_steps, done_steps):  # pragma: no cover
    total = total_steps[row]
    return total - done_steps[row] <= STEP_EPS * max(total, 1.0)


@njit(cache=True)
def account_round(
    entity, types, rows_a, rows_b, ran_s, steps_a, steps_b, finish_a, finish_b, now, end_s,
    entity_time, type_total, total_steps, done_steps, demand_milli, attained_s, milli_s,
    job_start, first_type, done_rows, done_at,
):  # fmt: skip  # pragma: no cover
    """Account a round's plan (arrays over its entities) and the driver's report: each
    entity's time on its type and the type's total (Gavel's accounting), each member's
    steps, GPU-seconds received (ran x demand) and milli-seconds held (the round's length
    x demand, halved for a pair's members), and its start and first type on its first
    round. The members that finished, first members in plan order then second members,
    go to ``done_rows``/``done_at`` (length >= 2 x entities); returns how many."""
    n = entity.shape[0]
    held = end_s - now
    for i in range(n):
        entity_time[entity[i], types[i]] += ran_s[i]
    for i in range(n):
        type_total[types[i]] += ran_s[i]
    for i in range(n):
        pair = rows_b[i] >= 0
        share = held * (0.5 if pair else 1.0)
        _credit(rows_a[i], steps_a[i], ran_s[i], share, types[i], now, job_start,
                first_type, done_steps, demand_milli, attained_s, milli_s)  # fmt: skip
    for i in range(n):
        if rows_b[i] >= 0:
            _credit(rows_b[i], steps_b[i], ran_s[i], held * 0.5, types[i], now, job_start,
                    first_type, done_steps, demand_milli, attained_s, milli_s)  # fmt: skip
    done = 0
    for i in range(n):
        if _finished(rows_a[i], total_steps, done_steps):
            done_rows[done] = rows_a[i]
            done_at[done] = finish_a[i]
            done += 1
    for i in range(n):
        if rows_b[i] >= 0 and _finished(rows_b[i], total_steps, done_steps):
            done_rows[done] = rows_b[i]
            done_at[done] = finish_b[i]
            done += 1
    return done


@njit(cache=True)
def finish_times(
    now, rows_b, steps_a, rate_a, steps_b, rate_b, has_pairs, finish_a, finish_b, ran_s
):  # fmt: skip  # pragma: no cover
    """A simulated round's progress model over the plan's entities: each member's last step
    at ``now + steps / rate`` (``finish_a``; ``finish_b`` for pairs' second members, when
    ``has_pairs``), each entity ran until its last member stopped (``ran_s``); returns the
    latest finish (-inf for no entity). Rates are positive (the plan runs no entity with a
    zero rate), so no NaN reaches the maxima."""
    end = -np.inf
    for i in range(steps_a.shape[0]):
        f = steps_a[i] / rate_a[i] + now
        finish_a[i] = f
        if has_pairs:
            if rows_b[i] >= 0:
                g = now + steps_b[i] / rate_b[i]
                finish_b[i] = g
                if g > f:
                    f = g
            else:
                finish_b[i] = 0.0
        ran_s[i] = f - now
        if f > end:
            end = f
    return end


@njit(cache=True)
def round_singles(
    type_order, x, time, tie_order, type_total, runnable, demand, ent_rows_a, ent_rows_b,
    alive, active, capacity_milli, skip_zero, chosen, chosen_type, taken,
    held_type, held_gang, held_list, held_known, keep, num_gpu, gpu_milli, cpu_milli,
    memory_mib, symmetric, type_nodes, type_start, gpu_free, gpu_tasks, cpu_free,
    memory_free, kind_count, node_version, row_node, row_slots, row_count, row_milli,
    row_cpu, row_memory, extended, got, rest, out_placed, out_extended,
    ent_rate_a, ent_rate_b, total_steps, done_steps, round_s,
):  # fmt: skip  # pragma: no cover
    """A round in one call: ``choice_kernel.choose`` (into ``chosen``/``chosen_type``),
    ``kernel.start_singles`` over the chosen entities and, when that placed every one it
    could by itself (no pair, no gang, no entity for the placement strategy), the plan's
    arrays (``plan_arrays``). Returns (entities chosen, ``start_singles``' result, the
    plan's arrays or empty ones, whether the plan was made)."""
    count = choose(
        x, time, tie_order, type_total, runnable, demand, ent_rows_a, ent_rows_b, alive,
        active, type_order, capacity_milli, skip_zero, chosen, chosen_type, taken,
    )  # fmt: skip
    es = chosen[:count]
    ts = chosen_type[:count]
    started = start_singles(
        ent_rows_a[es], ent_rows_b[es], ts, active, held_type, held_gang, held_list,
        held_known, keep, num_gpu, gpu_milli, cpu_milli, memory_mib, symmetric, type_nodes,
        type_start, gpu_free, gpu_tasks, cpu_free, memory_free, kind_count, node_version,
        row_node, row_slots, row_count, row_milli, row_cpu, row_memory, extended[:count],
        got[:count], rest[:count], out_placed[:count], out_extended[:count],
    )  # fmt: skip
    m = started[2] + started[5]  # extended + placed anew
    planned = started[0] == STARTED and started[7] == 0
    if not planned:
        m = 0
    arrays = plan_arrays(
        es, ts, out_placed[:m], ent_rows_a, ent_rows_b, ent_rate_a, ent_rate_b, total_steps,
        done_steps, round_s,
    )  # fmt: skip
    return count, started, arrays, planned
