"""Mechanisms are plug-ins: the registry runs a toy one, and the shipped ones by name."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpumosaic.cli import app
from gpumosaic.mechanisms.contract import check_placement
from gpumosaic.mechanisms.event.simulator import EventSimulator
from gpumosaic.placement.workload import TargetWorkload
from gpumosaic.run import registry as mechanisms
from gpumosaic.run.build import run
from gpumosaic.run.description import RunDescription
from gpumosaic.run.registry import PolicyKind, RunParts

runner = CliRunner()
# Multi-GPU jobs queue on one 4-GPU server: backfill changes who waits.
WORKLOAD = "gavel:jobs=16,rate=60,multigpu=on"


class StrictFifo:
    """A toy mechanism: the event simulator, always without backfill."""

    name = "strict"
    policy_kind = PolicyKind.QUEUE_ORDER
    default_placement = "firstfit"
    own_placement = None

    def check(self, description: RunDescription) -> None:
        check_placement(description.placement)

    def target(self, workload):  # type: ignore[no-untyped-def]
        return TargetWorkload.from_jobs(workload.target_sample())

    def sharing(self, description: RunDescription) -> None:
        return None

    def simulate(self, parts: RunParts, progress, hooks=None):  # type: ignore[no-untyped-def]
        order, placement = parts.policy, parts.placement
        sim = EventSimulator(
            parts.cluster, parts.workload, placement, order, rng=parts.rng, backfill=False
        )
        return sim.run()


def test_a_toy_mechanism_plugs_in_through_the_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(mechanisms.MECHANISMS, "strict", StrictFifo())
    base = {"cluster": "v100:4", "gpus_per_node": 4, "workload": WORKLOAD, "seed": 2}
    toy = run(RunDescription(**base, mechanism="strict"))
    strict = run(RunDescription(**base, mechanism="event", placement="firstfit", backfill=False))
    loose = run(RunDescription(**base, mechanism="event", placement="firstfit"))
    assert toy.result.records == strict.result.records
    assert toy.summary.avg_jct_s != loose.summary.avg_jct_s
    assert RunDescription(**base, mechanism="strict").resolved_placement() == "firstfit"


def _simulate(*args: str) -> dict[str, float]:
    result = runner.invoke(
        app, ["simulate", "--cluster", "v100:2", "--workload", "gavel:jobs=10,rate=30", *args]
    )
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_mechanism_gandiva_is_sharing_gandiva() -> None:
    by_mechanism = _simulate("--mechanism", "gandiva", "--json")
    by_sharing = _simulate("--sharing", "gandiva", "--json")
    assert by_mechanism["avg_jct_s"] == by_sharing["avg_jct_s"]
    assert by_mechanism["placement"] == "affinity"


@pytest.mark.slow  # several whole round-mechanism runs: seconds of CPU
def test_fifo_under_rounds_follows_the_seed(tmp_path: Path) -> None:
    """Gavel's fifo draws a random GPU type for each job: the draw follows --seed (it used
    to come from seed 0 whatever the run's seed). The jobs come from a fixed trace, so
    only the run's draws differ between seeds."""
    trace = resources.files("gpumosaic") / "data" / "gavel" / "traces" / "minimize_makespan.trace"
    small = tmp_path / "small.trace"
    small.write_text("".join(trace.read_text().splitlines(keepends=True)[:12]))
    jcts = {}
    for seed in range(4):
        result = runner.invoke(
            app,
            [
                "simulate",
                "--cluster",
                "v100:2,p100:2,k80:2",
                "--workload",
                f"gavel-trace:{small}",
                "--policy",
                "fifo",
                "--mechanism",
                "rounds",
                "--placement",
                "strided",
                "--json",
                "--seed",
                str(seed),
                "--allow-rejects",  # job 9 asks for 4 GPUs of one model: never fits
            ],
        )
        assert result.exit_code == 0, result.output
        jcts[seed] = json.loads(result.stdout)["avg_jct_s"]
    assert len(set(jcts.values())) > 1, jcts


def test_gandivas_own_order_is_the_name_its_ranking_registers() -> None:
    # mechanisms/gandiva/plugin.py spells it so that checking a description loads no ranking.
    from gpumosaic.mechanisms.gandiva.plugin import GandivaMechanism
    from gpumosaic.mechanisms.gandiva.ranking import AFFINITY

    mechanism = GandivaMechanism()
    assert mechanism.own_placement == AFFINITY == mechanism.default_placement


def test_lazy_packages_still_name_everything() -> None:
    # gpumosaic.model, .sharing and .mechanisms.gandiva load their names on first use.
    import importlib

    for package in ("gpumosaic.model", "gpumosaic.sharing", "gpumosaic.mechanisms.gandiva"):
        module = importlib.import_module(package)
        for name in module.__all__:
            assert getattr(module, name) is not None, (package, name)
        with pytest.raises(AttributeError):
            module.no_such_name  # noqa: B018
