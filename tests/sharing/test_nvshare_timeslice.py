"""nvshare time-slicing on hand-worked schedules, the anti-thrashing switch, early release."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpumosaic.sharing import NvshareModel, PagingModel, SharedJob
from gpumosaic.sharing.paging import MIB_PER_GB

GPU_MIB = 16384.0
SMALL_MIB = 1000.0  # any two fit: hand-overs cost only the fixed sync


def gpu_only(name: str, solo_s: float, ws_mib: float = SMALL_MIB, arrival_s: float = 0.0):
    return SharedJob(name, solo_s, 1.0, ws_mib, arrival_s=arrival_s)


def test_two_jobs_round_robin_by_hand() -> None:
    # A, B: 100 s of GPU work each, TQ 30, hand-over cost h = 1 s, working sets fit.
    # A [0,30] -> 70 left. B granted at 30, pays 1, runs [31,60] -> 71 left.
    # A at 60: [61,90] -> 41. B at 90: [91,120] -> 42. A at 120: [121,150] -> 12.
    # B at 150: [151,180] -> 13. A at 180: [181,193] done at 193, exits, lock to B.
    # B at 193: [194,207] done at 207. Hand-overs at 30,60,90,120,150,180,193 = 7.
    model = NvshareModel(tq_s=30, handover_s=1.0)
    out = model.simulate([gpu_only("A", 100), gpu_only("B", 100)], GPU_MIB)
    assert out.job("A").finish_s == pytest.approx(193)
    assert out.job("B").finish_s == pytest.approx(207)
    assert out.handovers == 7
    # B waits [0,30], [60,90], [120,150] and [180,193].
    assert out.job("B").lock_wait_s == pytest.approx(30 + 30 + 30 + 13)
    assert out.thrash_s == 0


def test_three_jobs_fcfs_by_hand() -> None:
    # A, B, C: 50 s each, TQ 20, h = 1, FCFS in submission order.
    # A [0,20] ->30. B [21,40] ->31. C [41,60] ->31. A [61,80] ->11. B [81,100] ->12.
    # C [101,120] ->12. A [121,132] done 132. B [133,145] done 145. C [146,158] done 158.
    # Hand-overs at 20,40,60,80,100,120,132,145 = 8; 150 s of work + 8 x 1 s = 158.
    model = NvshareModel(tq_s=20, handover_s=1.0)
    out = model.simulate([gpu_only("A", 50), gpu_only("B", 50), gpu_only("C", 50)], GPU_MIB)
    assert [j.finish_s for j in out.jobs] == pytest.approx([132, 145, 158])
    assert out.handovers == 8
    assert out.makespan_s == pytest.approx(158)


def test_refill_priced_by_fault_and_writeback_bandwidth() -> None:
    # Two 10,000 MiB working sets on 16,384 MiB: 3,616 MiB overflow. TQ 30, no sync cost.
    # B's first grant (t=30) only evicts 3,616 MiB of A (its own first load is part of its
    # solo time): e = 3616 / link. Every later grant brings 3,616 MiB back in one dense
    # pass -- 51% faulted at the fault bandwidth, the rest prefetched at the link
    # bandwidth -- while as much is written back on the link's other direction:
    # r = max(0.51 f + 0.49 e, e), f = 3616 / fault bandwidth. With 60 s each
    # (hand-worked): A [0,30]; B stalls e, runs to 60; A stalls r, runs to 90; B stalls r,
    # runs to 120; A stalls r and finishes its last r; B stalls r, finishes r + e.
    # Makespan = 120 + e + 4r.
    paging = PagingModel(link_gb_s=12.0, fault_gb_s=5.0)
    model = NvshareModel(tq_s=30, handover_s=0.0, paging=paging)
    out = model.simulate([gpu_only("A", 60, 10_000), gpu_only("B", 60, 10_000)], GPU_MIB)
    e = 3616 / (12.0 * MIB_PER_GB)
    f = 3616 / (5.0 * MIB_PER_GB)
    r = max(0.51 * f + 0.49 * e, e)
    assert out.makespan_s == pytest.approx(120 + e + 4 * r)
    assert out.job("A").finish_s == pytest.approx(120 + 2 * r)
    assert out.memory_pressure == pytest.approx(20_000 / GPU_MIB)


def test_anti_thrashing_switch() -> None:
    big = 15.3 * 1024
    jobs = [gpu_only("A", 100, big), gpu_only("B", 100, big)]
    off = NvshareModel(anti_thrashing=False).simulate(jobs, GPU_MIB)
    on = NvshareModel(tq_s=30, anti_thrashing=True).simulate(jobs, GPU_MIB)
    assert off.makespan_s > 5 * 200  # thrashing collapses progress
    assert off.thrash_s > 0 and on.thrash_s == 0
    # On: serialized, plus one refill (< 10 s) per hand-over.
    assert 200 < on.makespan_s < 200 + 10 * on.handovers
    assert on.handovers >= 6


def test_off_mode_fitting_jobs_share_compute() -> None:
    # Two GPU-only jobs whose GPU phases keep the GPU 85% busy: together they need 1.7 s of
    # GPU per second of progress each, so both finish at 100 * 1.7 = 170 s.
    model = NvshareModel(anti_thrashing=False, gpu_busy=0.85)
    out = model.simulate([gpu_only("A", 100), gpu_only("B", 100)], GPU_MIB)
    assert [j.finish_s for j in out.jobs] == pytest.approx([170, 170])
    assert out.handovers == 0


def test_off_mode_thrashing_rate_by_hand() -> None:
    # 10,000 MiB each: each keeps 16384/20000 of its pages, misses 1,808 MiB per 0.2 s sweep,
    # refaulted at 5 GB/s: extra x = 1808 / (5 GB/s) / 0.2 s per solo second. Both share one
    # GPU + fault path: 2 * (0.85 + x) seconds per second of progress each.
    paging = PagingModel(link_gb_s=12.0, fault_gb_s=5.0, sweep_s=0.2)
    model = NvshareModel(anti_thrashing=False, paging=paging, gpu_busy=0.85)
    out = model.simulate([gpu_only("A", 100, 10_000), gpu_only("B", 100, 10_000)], GPU_MIB)
    x = 1808 / (5.0 * MIB_PER_GB) / 0.2
    assert out.makespan_s == pytest.approx(100 * 2 * (0.85 + x))
    assert out.job("A").thrash_s == pytest.approx(out.makespan_s)


def test_early_release_when_holder_goes_idle() -> None:
    # A: 20 s on the GPU then 80 s on the CPU; B: 50 s GPU-only, queued behind A.
    # A goes idle at 20 and releases 5 s later; B runs [25,75]. Without early release B
    # waits for A to exit at 100 and finishes at 150.
    a = SharedJob("A", 100, 0.2, SMALL_MIB)
    b = gpu_only("B", 50)
    out = NvshareModel(tq_s=1000, handover_s=0.0, idle_release_s=5.0).simulate([a, b], GPU_MIB)
    assert out.job("B").finish_s == pytest.approx(75)
    assert out.job("B").lock_wait_s == pytest.approx(25)
    assert out.job("A").finish_s == pytest.approx(100)
    late = NvshareModel(tq_s=1000, handover_s=0.0, idle_release_s=1e6).simulate([a, b], GPU_MIB)
    assert late.job("B").finish_s == pytest.approx(150)


def test_holder_nobody_waits_for_keeps_the_gpu_and_late_arrival_queues() -> None:
    # A alone is re-granted at 30; B arrives at 50 and gets the GPU at A's next expiry (60).
    model = NvshareModel(tq_s=30, handover_s=0.0)
    out = model.simulate([gpu_only("A", 100), gpu_only("B", 20, arrival_s=50)], GPU_MIB)
    assert out.job("B").finish_s == pytest.approx(80)
    assert out.job("A").finish_s == pytest.approx(120)
    assert out.job("B").slowdown == pytest.approx(30 / 20)


@pytest.mark.parametrize("tq_s", [0.05, 0.3, 1.0, 7.0, 30.0, 45.5, 1e4])
@pytest.mark.parametrize("ws_mib", [SMALL_MIB, 15.3 * 1024])
def test_any_tq_finishes_and_accounts_every_second(tq_s: float, ws_mib: float) -> None:
    jobs = [gpu_only("A", 40, ws_mib), gpu_only("B", 30, ws_mib), gpu_only("C", 20, ws_mib)]
    out = NvshareModel(tq_s=tq_s).simulate(jobs, GPU_MIB)
    for j in out.jobs:
        # GPU-only jobs under the lock: every second is work, waiting or refilling.
        assert j.run_s == pytest.approx(j.solo_s + j.lock_wait_s + j.refill_s)
        assert j.slowdown >= 1.0
    assert out.makespan_s >= 90


def test_effective_rates_for_the_cluster_simulator() -> None:
    model = NvshareModel(anti_thrashing=False, gpu_busy=0.85)
    rates = model.effective_rates([gpu_only("A", 100), gpu_only("B", 100)], GPU_MIB)
    assert rates == pytest.approx([1 / 1.7, 1 / 1.7])


def test_rejects_bad_parameters() -> None:
    with pytest.raises(ValueError):
        NvshareModel(tq_s=0)
    with pytest.raises(ValueError):
        NvshareModel().simulate([gpu_only("A", 1), gpu_only("A", 1)], GPU_MIB)
    with pytest.raises(ValueError):
        SharedJob("x", 10, 0.0, 1.0)


@settings(max_examples=60, deadline=None)
@given(
    jobs=st.lists(
        st.tuples(
            st.floats(1.0, 200.0),  # solo_s
            st.sampled_from([0.1, 0.5, 0.9, 1.0]),  # gpu_fraction
            st.floats(0.0, 20_000.0),  # working set, MiB
            st.sampled_from([None, 5.0, 40.0]),  # cycle_s
            st.floats(0.0, 100.0),  # arrival_s
        ),
        min_size=1,
        max_size=4,
    ),
    tq_s=st.floats(0.1, 500.0),
    anti_thrashing=st.sampled_from([True, False, "auto"]),
)
def test_random_gpus_finish_and_never_beat_solo(jobs, tq_s, anti_thrashing) -> None:
    specs = [
        SharedJob(f"j{i}", solo, g, ws, cycle, arrival)
        for i, (solo, g, ws, cycle, arrival) in enumerate(jobs)
    ]
    model = NvshareModel(tq_s=tq_s, anti_thrashing=anti_thrashing)
    out = model.simulate(specs, GPU_MIB)
    for spec, j in zip(specs, out.jobs, strict=True):
        assert j.finish_s >= spec.arrival_s + spec.solo_s - 1e-6
        assert j.lock_wait_s >= 0 and j.refill_s >= 0 and j.thrash_s >= 0
        if anti_thrashing is False:
            assert j.lock_wait_s == 0
    assert out.handovers == 0 or anti_thrashing is not False
    if anti_thrashing == "auto" and sum(x.working_set_mib for x in specs) <= GPU_MIB:
        assert out.handovers == 0  # everything fits together: never serialized


def test_refill_is_full_duplex_and_partly_prefetched() -> None:
    paging = PagingModel(link_gb_s=12.0, fault_gb_s=5.0, prefetch_threshold=0.51)
    gb = MIB_PER_GB
    # The write-back runs on the link's other direction: the longer transfer wins.
    assert paging.refill_s(0, 12 * gb) == pytest.approx(1.0)
    assert paging.refill_s(10 * gb, 10 * gb) == pytest.approx(0.51 * 2 + 0.49 * 10 / 12)
    # Without the prefetcher every page faults: the old, slower price.
    no_prefetch = PagingModel(link_gb_s=12.0, fault_gb_s=5.0, prefetch_threshold=1.0)
    assert no_prefetch.refill_s(10 * gb, 0) == pytest.approx(2.0)
    with pytest.raises(ValueError):
        PagingModel(prefetch_threshold=1.5)


def test_auto_serializes_only_while_the_working_sets_overflow() -> None:
    from gpumosaic.experiments.reproductions.nvshare import job_pair

    # The thesis pairs: two small jobs fit (auto runs them together, as "off"), two big
    # ones do not (auto serializes them, as "on"), decision for decision.
    for job, same_as in (("small_50", False), ("big_90", True)):
        auto = NvshareModel(tq_s=30, anti_thrashing="auto").simulate(job_pair(job), GPU_MIB)
        fixed = NvshareModel(tq_s=30, anti_thrashing=same_as).simulate(job_pair(job), GPU_MIB)
        assert auto == fixed
    # A and B fit together; C arrives at 50 s and overflows: serialized until A leaves at
    # 100 s, then B and C fit and run together again.
    a = gpu_only("A", 100, 6000)
    b = gpu_only("B", 300, 6000)
    c = gpu_only("C", 300, 6000, arrival_s=50)
    out = NvshareModel(tq_s=10, anti_thrashing="auto", handover_s=0.0).simulate([a, b, c], GPU_MIB)
    assert out.handovers > 0
    assert out.job("C").lock_wait_s > 0 and out.job("C").thrash_s == 0
    on = NvshareModel(tq_s=10, anti_thrashing=True, handover_s=0.0).simulate([a, b, c], GPU_MIB)
    assert out.makespan_s < on.makespan_s  # free-running after A left beats serializing
