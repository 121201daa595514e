"""``sim-vs-live --sharing nvshare:...``: the spec both sides accept, its plumbing to the
two sides, the hand-overs read from the daemons' logs, and end to end on local Ray."""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpumosaic.cli import app
from gpumosaic.errors import InputError
from gpumosaic.experiments.sim_vs_live import sharing
from gpumosaic.experiments.sim_vs_live.inputs import SimVsLiveOptions
from gpumosaic.experiments.sim_vs_live.rounds import compare
from gpumosaic.model.job import JobSpec
from gpumosaic.run.description import RunDescription
from gpumosaic.runtime.share.supervisor import parse_sharing, share_socket_dir
from gpumosaic.sharing.lock import AntiThrashing

WORKLOAD = Path(__file__).parent / "jobs" / "sim_vs_live_shared.yaml"
runner = CliRunner()


@pytest.fixture
def short_socket_root(monkeypatch):  # type: ignore[no-untyped-def]
    """Socket dirs under a fresh short tmp dir (a socket path has at most 107 bytes)."""
    root = tempfile.mkdtemp(prefix="gm-svl-", dir="/tmp")
    monkeypatch.setenv("XDG_RUNTIME_DIR", root)
    yield Path(root)
    shutil.rmtree(root, ignore_errors=True)


def test_one_spec_for_both_sides_with_tq_in_job_time() -> None:
    spec = sharing.parse("nvshare:tq=30,at=auto")
    assert spec is not None
    assert spec.tq_s == 30.0 and spec.anti_thrashing is AntiThrashing.AUTO
    live = spec.live_spec(100.0)  # 0.3 wall seconds at time scale 100
    parsed = parse_sharing(live)
    assert parsed is not None
    assert parsed.settings.tq_s == pytest.approx(0.3)
    assert parsed.settings.anti_thrashing is AntiThrashing.AUTO
    model = spec.speed(100.0, handover_s=0.05).model
    assert model.tq_s == 30.0 and model.mode is AntiThrashing.AUTO
    assert model.handover_s == 0.05
    assert model.idle_release_s == pytest.approx(sharing.INTERPOSER_IDLE_S * 100)
    # Only fractional jobs share, as live: a whole-GPU job is admitted as it is.
    whole = JobSpec(id=0, arrival_s=0.0, job_type="A3C", num_gpu=1, gpu_milli=1000, work=1.0)
    assert spec.speed(100.0, 0.0).admit(whole) == whole
    assert sharing.parse(None) is None and sharing.parse("none") is None


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ("nvshare:tq=30,mem_cap=on", "mem_cap is serve's alone"),
        ("nvshare:tq=30,grace=2", "simulate (the simulator's side) refuses it: "),
        ("nvshare:tq=30,jobs_per_gpu=3", "serve (the live side) refuses it: "),
        ("nvshare:anti_thrashing=maybe", "expected one of auto, on, off"),
        ("nvshare:tq=-1", "tq must be"),
        ("capped", "nvshare:tq=S"),
        ("gandiva", "nvshare:tq=S"),
    ],
)
def test_a_spec_one_side_would_refuse_is_one_error_naming_the_flag(spec: str, says: str) -> None:
    with pytest.raises(InputError) as caught:
        sharing.parse(spec)
    assert caught.value.field == "--sharing"
    assert says in str(caught.value)


def test_a_quantum_under_the_daemons_floor_at_this_time_scale_is_refused() -> None:
    spec = sharing.parse("nvshare:tq=1")
    assert spec is not None
    with pytest.raises(InputError, match="raise tq or lower --time-scale") as caught:
        spec.live_spec(500.0)  # 2 ms of wall time
    assert caught.value.field == "--sharing"


def test_declared_working_sets_are_refused() -> None:
    job = JobSpec(
        id=3, arrival_s=0.0, job_type="A3C", num_gpu=1, gpu_milli=500, work=1.0,
        gpu_memory_mib=2000,
    )  # fmt: skip
    with pytest.raises(InputError, match="job 3 declares gpu_memory_mib") as caught:
        sharing.check_jobs([job])
    assert caught.value.field == "--workload"


def test_the_cli_refuses_a_bad_spec_in_one_line_before_ray(tmp_path: Path) -> None:
    result = runner.invoke(
        app,
        [
            "sim-vs-live", "--cluster", "v100:2", "--workload", str(WORKLOAD),
            "--policy", "max_min_fairness_perf", "--sharing", "nvshare:tq=30,mem_cap=on",
        ],
    )  # fmt: skip
    assert result.exit_code == 2
    assert "--sharing" in result.output and "mem_cap" in result.output
    assert "Traceback" not in result.output


def _event(t: float, event: str, client: int, handover: bool | None = None) -> str:
    record: dict[str, object] = {"t_ns": round(t * 1e9), "gpu": 0, "event": event}
    record["client"] = client
    if handover is not None:
        record["handover"] = handover
    return json.dumps(record)


def test_hand_overs_and_their_gaps_come_from_the_daemons_logs(short_socket_root: Path) -> None:
    state = str(short_socket_root / "run" / "state.db")
    sock_dir = share_socket_dir(state)
    sock_dir.mkdir(parents=True)
    lines = [
        _event(0.0, "REQ_LOCK", 1),
        _event(0.0, "LOCK_OK", 1, handover=False),
        _event(0.1, "REQ_LOCK", 2),
        _event(0.3, "DROP_LOCK", 1),
        _event(0.31, "LOCK_RELEASED", 1),
        _event(0.312, "LOCK_OK", 2, handover=True),  # 2 waited: 2 ms with nobody holding
        _event(0.5, "LOCK_RELEASED", 2),  # idle release; 1 asks again only later
        _event(0.9, "REQ_LOCK", 1),
        _event(0.9, "LOCK_OK", 1, handover=True),  # 0: granted as it asked
        '{"t_ns": 1',  # a line cut short by a daemon's death
    ]
    (sock_dir / "events-gpu0.jsonl").write_text("\n".join(lines) + "\n")
    stats = sharing.handover_stats(state)
    assert stats.handovers == 2
    assert stats.mean_gap_wall_s == pytest.approx(0.001)
    assert stats.job_s(100.0) == pytest.approx(0.1)
    assert not sock_dir.exists()  # the run's socket dir is removed once read
    empty = sharing.handover_stats(state)
    assert empty.handovers == 0 and empty.job_s(100.0) == 0.0


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["on", "auto"])
def test_the_live_share_runtime_agrees_with_the_nvshare_model(
    ray_cluster: object, tmp_path: Path, short_socket_root: Path, mode: str
) -> None:
    # Four half-GPU jobs on two V100s (two per GPU), time scale 100: about 20 s of wall
    # time. docs/live.md ("Sharing: simulator vs live") has the measured agreement.
    description = RunDescription(
        cluster="v100:2",
        workload=str(WORKLOAD),
        policy="max_min_fairness_perf",
        mechanism="rounds",
    )
    lines: list[str] = []
    c = compare(
        SimVsLiveOptions(
            description, time_scale=100.0, wall_limit_s=120.0, sharing=f"nvshare:tq=30,at={mode}"
        ),
        say=lines.append,
        state_dir=tmp_path / "state",
    )
    assert c.live_finished, lines
    assert c.sim.completed == c.live.completed == 4
    assert abs(c.avg_jct_rel_diff) <= 0.10, c.to_json()
    assert c.sharing is not None
    data = c.to_json()
    live, sim = data["live"], data["sim"]
    assert isinstance(live, dict) and isinstance(sim, dict)
    assert sim["sharing"]["anti_thrashing"] == mode and sim["sharing"]["tq_s"] == 30.0
    assert live["sharing"]["tq_wall_s"] == pytest.approx(0.3)
    if mode == "on":
        # The daemons handed each GPU back and forth about every quantum.
        assert c.sharing.live.handovers >= 10
    else:
        # No working sets: auto lets the pairs run at once (their kernels queue on the
        # stand-in's shared device), as the model's compute sharing has it.
        assert c.sharing.live.handovers == 0
    # Sharing slowed the jobs on both sides: unshared, this workload's average JCT is
    # 893 s simulated (docs/live.md); shared, 1.6-1.9 times that.
    assert c.sim.avg_jct_s > 1300 and c.live.avg_jct_s > 1300
