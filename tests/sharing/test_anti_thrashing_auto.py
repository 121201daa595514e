"""``anti_thrashing=auto`` in the nvshare model: the live lock's rule (serialize only while
the registered working sets overflow the GPU's memory), and the one spelling that
``simulate --sharing`` and ``serve --sharing`` both accept."""

from __future__ import annotations

import pytest

from gpumosaic.errors import InputError
from gpumosaic.model.gpu import gpu_model
from gpumosaic.model.job import JobSpec
from gpumosaic.runtime.share.supervisor import parse_sharing
from gpumosaic.sharing import NvshareModel, SharedJob
from gpumosaic.sharing.gpu_phase import GPU_PHASE_BUSY
from gpumosaic.sharing.lock import AntiThrashing, GpuLock
from gpumosaic.sharing.speed import NvshareSpeed, build_speed_model

GPU_MIB = 16384.0


def gpu_only(name: str, solo_s: float, ws_mib: float, arrival_s: float = 0.0) -> SharedJob:
    return SharedJob(name, solo_s, 1.0, ws_mib, arrival_s=arrival_s)


@pytest.mark.parametrize(
    ("word", "mode"),
    [
        ("auto", AntiThrashing.AUTO),
        ("AUTO", AntiThrashing.AUTO),
        ("on", AntiThrashing.ON),
        ("true", AntiThrashing.ON),
        ("yes", AntiThrashing.ON),
        ("1", AntiThrashing.ON),
        ("off", AntiThrashing.OFF),
        ("False", AntiThrashing.OFF),
        ("no", AntiThrashing.OFF),
        ("0", AntiThrashing.OFF),
    ],
)
@pytest.mark.parametrize("key", ["anti_thrashing", "at", "anti-thrashing"])
def test_both_sides_read_the_same_spec_alike(word: str, mode: AntiThrashing, key: str) -> None:
    spec = f"nvshare:tq=2.5,{key}={word}"
    sim = build_speed_model(spec)
    assert isinstance(sim, NvshareSpeed)
    assert sim.model.mode is mode and sim.model.tq_s == 2.5
    live = parse_sharing(spec)
    assert live is not None
    assert live.settings.anti_thrashing is mode and live.settings.tq_s == 2.5


@pytest.mark.parametrize("word", ["maybe", "", "2", "autoo"])
def test_a_bad_mode_is_refused_by_both_sides_naming_the_flag(word: str) -> None:
    spec = f"nvshare:anti_thrashing={word}"
    for parse in (build_speed_model, parse_sharing):
        with pytest.raises(InputError) as caught:
            parse(spec)
        assert caught.value.field == "--sharing"
        assert "expected one of auto, on, off" in str(caught.value)


def test_the_defaults_stay_as_they_were() -> None:
    # simulate's nvshare defaults to on (nvshare's own default), serve's to auto.
    sim = build_speed_model("nvshare")
    assert isinstance(sim, NvshareSpeed) and sim.model.mode is AntiThrashing.ON
    live = parse_sharing("nvshare")
    assert live is not None and live.settings.anti_thrashing is AntiThrashing.AUTO


# (working set of each of two jobs in MiB, the mode auto must behave as)
AUTO_TABLE = [
    (1000.0, False),  # 2 GB on 16 GB: they fit, both run (as off)
    (8000.0, False),  # 16,000 <= 16,384 MiB: still fit
    (8200.0, True),  # 16,400 > 16,384 MiB: overflow, serialized (as on)
    (15.3 * 1024, True),  # far over: serialized, no thrashing
]


@pytest.mark.parametrize(("ws_mib", "as_on"), AUTO_TABLE)
def test_auto_is_off_while_the_sets_fit_and_on_once_they_overflow(
    ws_mib: float, as_on: bool
) -> None:
    jobs = [gpu_only("A", 100, ws_mib), gpu_only("B", 100, ws_mib)]
    model = NvshareModel(tq_s=30, anti_thrashing="auto")
    auto = model.simulate(jobs, GPU_MIB)
    same = NvshareModel(tq_s=30, anti_thrashing=as_on).simulate(jobs, GPU_MIB)
    assert auto.thrash_s == 0
    if as_on:
        # Serialized as with on, from the moment B's set overflowed the memory. With on,
        # A held the lock before B registered, so B's first grant is one hand-over more.
        assert auto.job("A").finish_s == pytest.approx(same.job("A").finish_s)
        assert 0 <= same.makespan_s - auto.makespan_s <= model.handover_s + 1e-9
        assert auto.handovers == same.handovers - 1 >= 3
    else:
        assert auto == same
        # Both run at once, sharing the GPU's compute: 1 / (2 x busy) each.
        assert auto.handovers == 0
        assert auto.makespan_s == pytest.approx(100 * 2 * GPU_PHASE_BUSY)


def test_auto_switches_when_a_third_job_overflows_the_memory_and_back() -> None:
    # A and B (8,000 MiB each) fit and run together; C (1,000 MiB) arrives at t = 50
    # and the three overflow: serialized until one leaves and the rest fit again.
    jobs = [gpu_only("A", 100, 8000), gpu_only("B", 100, 8000), gpu_only("C", 40, 1000, 50.0)]
    auto = NvshareModel(tq_s=10, handover_s=0.0, anti_thrashing="auto").simulate(jobs, GPU_MIB)
    on = NvshareModel(tq_s=10, handover_s=0.0, anti_thrashing=True).simulate(jobs, GPU_MIB)
    off = NvshareModel(tq_s=10, handover_s=0.0, anti_thrashing=False).simulate(jobs, GPU_MIB)
    assert auto.thrash_s == 0 < off.thrash_s  # off lets the three thrash
    assert auto.handovers > 0  # serialized while C was there
    # Before C, A and B ran together (no lock waits); on made them take turns from t = 0.
    assert auto.job("A").lock_wait_s + auto.job("B").lock_wait_s < (
        on.job("A").lock_wait_s + on.job("B").lock_wait_s
    )
    assert auto.makespan_s < on.makespan_s


def test_the_model_and_the_daemon_decide_with_one_lock() -> None:
    # The rule lives in GpuLock: what it says for a working-set pair is what the model does.
    for ws_mib, as_on in AUTO_TABLE:
        lock = GpuLock(0, 30.0, AntiThrashing.AUTO, memory_bytes=round(GPU_MIB * 2**20))
        for cid in (1, 2):
            lock.register(cid, cid, f"j{cid}", 0.0)
            lock.memory(cid, round(ws_mib * 2**20), 0, 0.0)
        assert lock.serialized is as_on


def test_the_cluster_simulators_speeds_follow_auto() -> None:
    v100 = gpu_model("v100")
    model = build_speed_model("nvshare:tq=30,anti_thrashing=auto")

    def pair(ws_mib: int) -> list[JobSpec]:
        return [
            JobSpec(
                id=i,
                arrival_s=0.0,
                job_type="A3C",
                num_gpu=1,
                gpu_milli=500,
                work=1.0,
                gpu_memory_mib=ws_mib,
            )
            for i in range(2)
        ]

    fit = model.factors(pair(1000), [300.0, 300.0], v100)
    assert fit.speeds == pytest.approx([1 / (2 * GPU_PHASE_BUSY)] * 2)
    assert list(fit.handovers_per_s) == [0.0, 0.0]
    over = model.factors(pair(int(v100.memory_mib * 0.6)), [300.0, 300.0], v100)
    assert all(0.4 < s < 0.5 for s in over.speeds)  # taking turns, less the hand-overs
    assert all(h > 0 for h in over.handovers_per_s)
