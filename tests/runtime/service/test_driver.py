"""The round driver with the in-process executor on a fake clock: the shared decider's
choices are what runs, time shares follow the allocation, restarts lose nothing."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from builders import in_process


def running_per_round(bench) -> dict[int, set[int]]:
    """Jobs that held a lease in each round, from the store's lease table."""
    out: dict[int, set[int]] = {}
    for lease in bench.store.leases():
        for r in range(lease.round, lease.round + lease.extensions + 1):
            out.setdefault(r, set()).add(lease.job_id)
    return out


def test_small_workload_completes_and_runs_what_the_decider_chose(tmp_path: Path) -> None:
    bench = in_process(tmp_path)
    ids = [bench.submit(60, gpu_milli=500 if i < 2 else 1000) for i in range(6)]
    for _ in range(40):
        bench.run_round(ticks=10, dt=1.0)
        if all(s == "done" for s in bench.states().values()):
            break
    assert bench.states() == dict.fromkeys(ids, "done")
    ran = running_per_round(bench)
    for k, plan in enumerate(bench.plans):
        chosen = {j for e in plan.entries for j in e.job_ids}
        assert ran.get(k, set()) == chosen, f"round {k}"
    # The two 500-milli jobs shared one GPU in some round.
    shared = [e for plan in bench.plans for e in plan.entries if e.parts[0].gpu_milli == 500]
    assert shared
    assert bench.driver.counters.extensions > 0


def test_time_shares_match_the_allocation_within_one_round(tmp_path: Path) -> None:
    # Three one-GPU jobs on two GPUs: max-min fairness gives each 2/3 of the time.
    bench = in_process(tmp_path, counts="v100:2", policy="max_min_fairness", round_s=10.0)
    ids = [bench.submit(10_000) for _ in range(3)]
    rounds = 12
    for _ in range(rounds):
        bench.run_round(ticks=10, dt=1.0)
    ent = bench.driver.decider.book.entities
    assert ent is not None
    x = {
        bench.driver.decider.jobs.specs[int(r)].id: float(ent.x[i].sum())
        for i, r in enumerate(ent.rows_a)
    }
    ran = running_per_round(bench)
    for job in ids:
        received = sum(job in ran.get(k, set()) for k in range(rounds))
        assert abs(received - x[job] * rounds) <= 1.0, (job, received, x[job])
    assert np.isclose(sum(x.values()), 2.0)


def test_measured_rate_replaces_the_prior(tmp_path: Path) -> None:
    bench = in_process(tmp_path, counts="v100:1", rate_of=lambda job, model: 5.0)
    job = bench.submit(1000)
    bench.run_round(ticks=10, dt=1.0)
    bench.run_round(ticks=10, dt=1.0)
    rates = bench.store.throughputs(job)
    assert abs(rates["V100"] - 5.0) < 0.5
    row = bench.driver.row_of[job]
    assert abs(bench.driver.decider.jobs.rates[row, 0] - rates["V100"]) < 1e-9


def test_cancel_while_queued_and_while_running(tmp_path: Path) -> None:
    bench = in_process(tmp_path, counts="v100:1")
    first, second = bench.submit(1000), bench.submit(1000)
    bench.run_round(ticks=2, dt=1.0)
    running = [j for j, s in bench.states().items() if s == "running"]
    queued = [j for j, s in bench.states().items() if s == "queued"]
    assert len(running) == 1 and len(queued) == 1
    bench.store.request_cancel(queued[0], bench.clock())
    bench.store.request_cancel(running[0], bench.clock())
    bench.clock.t += 1
    bench.driver.tick(bench.clock())
    bench.driver.tick(bench.clock())
    assert bench.states() == {first: "cancelled", second: "cancelled"}
    assert not bench.driver.decider.has_active_jobs


def test_restart_requeues_at_the_last_checkpoint(tmp_path: Path) -> None:
    fast = lambda job, model: 20.0  # noqa: E731
    bench = in_process(tmp_path, counts="v100:1", rate_of=fast)
    jobs = [bench.submit(1000), bench.submit(1000)]
    for _ in range(3):  # the two jobs take turns: each is preempted and checkpoints
        bench.run_round(ticks=10, dt=1.0)
    bench.run_round(ticks=3, dt=1.0)  # mid-round: one lease is alive
    before = {j: bench.store.job(j) for j in jobs}
    assert any(b.checkpoint_steps > 0 for b in before.values())
    # A new service on the same state file (the old process is gone).
    again = in_process(
        tmp_path, counts="v100:1", store=bench.store, clock=bench.clock, rate_of=fast
    )
    stale = again.driver.recover()
    assert len(stale) == 1
    for j in jobs:
        after = again.store.job(j)
        assert after is not None and after.state == "queued"
        assert after.steps_done == before[j].checkpoint_steps
        row = again.driver.row_of[j]
        assert again.driver.decider.jobs.done_steps[row] == before[j].checkpoint_steps
    for _ in range(40):
        again.run_round(ticks=10, dt=1.0)
        if all(s == "done" for s in again.states().values()):
            break
    assert again.states() == dict.fromkeys(jobs, "done")
