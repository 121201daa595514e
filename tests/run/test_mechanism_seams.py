"""The seams between mechanisms and between commands: one job list through every
mechanism gets the same answer (or the same typed refusal) per job, and one service
configuration gets the same refusal from ``simulate`` and ``serve`` (one line, exit 2)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpumosaic.cli import app
from gpumosaic.results.outcome import RejectReason
from gpumosaic.results.result import JobStatus
from gpumosaic.run.build import run
from gpumosaic.run.description import RunDescription

runner = CliRunner()
MECHANISMS = {"event": "fifo", "rounds": "max_min_fairness", "gandiva": "fifo"}


def _jobs(tmp_path: Path) -> Path:
    """On v100:4 (four one-GPU servers): a 4-GPU job that may span servers, an 8-GPU one
    that fits nowhere, a 1-GPU one."""
    path = tmp_path / "jobs.csv"
    path.write_text(
        "arrival_s,job_type,num_gpu,steps,may_span_nodes\n"
        "0,ResNet-18 (batch size 64),4,500,true\n"
        "0,ResNet-18 (batch size 64),8,500,true\n"
        "0,ResNet-18 (batch size 64),1,500,false\n"
    )
    return path


@pytest.mark.parametrize("mechanism", sorted(MECHANISMS))
def test_one_job_list_gets_one_answer_per_job_under_every_mechanism(
    tmp_path: Path, mechanism: str
) -> None:
    description = RunDescription(
        cluster="v100:4",
        workload=str(_jobs(tmp_path)),
        mechanism=mechanism,
        policy=MECHANISMS[mechanism],
    )
    records = {r.job_id: r for r in run(description).result.records}
    spanning, never, single = records[0], records[1], records[2]
    # The 8-GPU job: the same typed refusal, in the filter's words, everywhere.
    assert never.status is JobStatus.REJECTED
    assert never.rejection is RejectReason.NEVER_FITS
    assert "num_gpu=8" in never.reason
    assert single.status is JobStatus.COMPLETED
    # The spanning job fits the cluster only across servers: every mechanism runs it as
    # one gang (placement/gang.py), Gandiva included.
    assert spanning.status is JobStatus.COMPLETED, spanning.reason


def test_a_shared_speed_model_refuses_spanning_with_the_same_typed_reason(
    tmp_path: Path,
) -> None:
    """The event mechanism does not model a job across servers under a sharing model:
    the same refusal as Gandiva's (the rule's one home: mechanisms/admission.py)."""
    description = RunDescription(
        cluster="v100:4", workload=str(_jobs(tmp_path)), policy="fifo", sharing="nvshare"
    )
    spanning = run(description).result.records[0]
    assert spanning.rejection is RejectReason.SPANS_SERVERS
    assert "--sharing nvshare" in spanning.reason


SIMULATE = ["simulate", "--cluster", "v100:4", "--workload", "gavel:jobs=3,rate=0"]


def _serve(tmp_path: Path) -> list[str]:
    state = str(tmp_path / "state.db")
    return ["serve", "--cluster", "v100:4", "--state", state, "--port", "0"]


def _one_line(args: list[str]) -> str:
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), result.output
    assert "Traceback" not in result.output
    return lines[0]


@pytest.mark.parametrize(
    ("flags", "words"),
    [
        # Gandiva with an allocation policy: serve dropped both flags before.
        (
            ["--mechanism", "gandiva", "--policy", "max_min_fairness", "--placement", "pwr"],
            "--policy: gandiva is itself the time-slicing mechanism",
        ),
        (["--mechanism", "gandiva:packing=maybe"], "--mechanism gandiva:packing=maybe"),
        (["--mechanism", "gandiva:quantum=0"], "quantum_s must be > 0"),
        (["--mechanism", "gandiva", "--placement", "fgdd"], "--placement fgdd"),
        (["--mechanism", "rounds", "--policy", "sjf"], "is a queue order"),
        (["--mechanism", "rounds", "--placement", "affinity"], "affinity is Gandiva's own"),
        (["--mechanism", "rounds:x=1"], "only gandiva takes options"),
        (["--mechanism", "rounds", "--policy", "fifoo"], "--policy fifoo"),
    ],
)
def test_simulate_and_serve_refuse_one_configuration_with_one_line(
    tmp_path: Path, flags: list[str], words: str
) -> None:
    simulated = _one_line([*SIMULATE, *flags])
    served = _one_line([*_serve(tmp_path), *flags])
    assert words in simulated
    assert served == simulated
    assert not (tmp_path / "state.db").exists()  # refused before the service touched it


def test_serve_refuses_a_mechanism_without_a_live_driver(tmp_path: Path) -> None:
    line = _one_line([*_serve(tmp_path), "--mechanism", "event"])
    assert "--mechanism event: the event mechanism has no live driver" in line


def test_gandiva_live_is_built_with_the_placement_and_policy_it_is_given() -> None:
    """``serve --mechanism gandiva --placement pwr --policy sjf`` builds the decider
    with them (through run.build and the plug-in), as simulate does."""
    from gpumosaic.mechanisms.gandiva.plugin import GandivaMechanism
    from gpumosaic.model.cluster import ClusterSpec
    from gpumosaic.run.build import build_live_parts
    from gpumosaic.run.serve import target_jobs
    from gpumosaic.run.serve_description import ServeDescription

    served = ServeDescription(mechanism="gandiva:quantum=30", placement="pwr", policy="sjf")
    decisions = served.decisions()
    assert (decisions.mechanism, decisions.sharing) == ("gandiva", "gandiva:quantum=30")
    parts = build_live_parts(
        decisions, ClusterSpec.from_counts([("v100", 2)], gpus_per_node=1), target_jobs(None)
    )
    assert parts.placement is not None and parts.placement.name.startswith("pwr")
    decider = GandivaMechanism().live_decider(parts)
    assert decider.ranker is not None  # servers ranked by pwr within a tier
    assert decider.config.quantum_s == 30
    own = ServeDescription(mechanism="gandiva").decisions()
    assert (own.policy, own.resolved_placement()) == ("fifo", "affinity")


def test_the_defaults_that_differ_live_are_said_in_one_place() -> None:
    from gpumosaic.mode_defaults import ANTI_THRASHING, RESOLVE_INTERVAL_S
    from gpumosaic.run.serve_description import ServeDescription
    from gpumosaic.runtime.share.spec import parse_live_sharing
    from gpumosaic.sharing.spec import parse_sharing

    assert ServeDescription().decisions().resolve_interval_s == RESOLVE_INTERVAL_S.serve == 0
    simulated = RunDescription(cluster="v100:1", workload="gavel:jobs=1")
    assert simulated.resolve_interval_s == RESOLVE_INTERVAL_S.simulate == 1920
    live = parse_live_sharing("nvshare:tq=30")
    nvshare = parse_sharing("nvshare:tq=30").nvshare
    assert live is not None and nvshare is not None
    assert (nvshare.anti_thrashing, live.anti_thrashing) == (
        ANTI_THRASHING.simulate,
        ANTI_THRASHING.serve,
    )
    assert nvshare.tq == live.tq  # every other default is one


def test_a_hook_a_mechanism_has_no_use_for_is_refused(tmp_path: Path) -> None:
    """sim-vs-live's hooks reach the mechanisms through the contract; one given to a
    mechanism that cannot honour it is an error, never silently dropped."""
    from gpumosaic.mechanisms.contract import SimHooks
    from gpumosaic.run.build import build_parts
    from gpumosaic.run.registry import get_mechanism

    description = RunDescription(cluster="v100:4", workload=str(_jobs(tmp_path)), policy="fifo")
    parts = build_parts(description)
    with pytest.raises(ValueError, match="event mechanism has no on_plan hook"):
        get_mechanism("event").simulate(parts, None, SimHooks(on_plan=print))
    steps: list[float] = []
    gandiva = build_parts(
        RunDescription(cluster="v100:4", workload=str(_jobs(tmp_path)), mechanism="gandiva")
    )
    with pytest.raises(ValueError, match="launch_latency_s"):
        get_mechanism("gandiva").simulate(gandiva, None, SimHooks(launch_latency_s=1.0))
    get_mechanism("gandiva").simulate(
        gandiva, None, SimHooks(on_step=lambda now, _step: steps.append(now))
    )
    assert steps, "Gandiva's decider steps reached the on_step hook"
