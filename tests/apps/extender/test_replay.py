"""Replay through the wire: kube-scheduler's cycle over loopback HTTP reaches the same
decisions as ``gpumosaic fill`` (same placement, same seed), with and without a restart
of the extender in the middle. A 1-in-40 slice of openb:gpu keeps each replay short;
the full openb replay is run by hand (docs/kubernetes.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpumosaic.apps.extender.replay import replay
from gpumosaic.cli import app
from gpumosaic.run.fill import fill_replay
from gpumosaic.traces.openb import load_openb_nodes, load_openb_tasks

NODES = load_openb_nodes("openb:gpu")


@pytest.fixture(scope="module")
def small_nodes(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("nodes") / "nodes.csv"
    rows = ["sn,cpu_milli,memory_mib,gpu,model"]
    rows += [
        f"{n.name},{n.cpu_milli},{n.memory_mib},{n.num_gpus},{n.gpu.name}"
        for n in NODES.nodes[::40]
    ]
    path.write_text("\n".join(rows) + "\n")
    return path


@pytest.mark.parametrize(
    ("placement", "node_cache_capable", "restart_at"),
    [("fgd", True, 120), ("pwr=200,fgd=800", False, None)],
)
@pytest.mark.slow
def test_replay_makes_fills_decisions(small_nodes, placement, node_cache_capable, restart_at):
    cluster = load_openb_nodes(str(small_nodes))
    tasks = load_openb_tasks("openb:default")
    fill = fill_replay(cluster, tasks, placement, seed=42)
    result = replay(
        cluster,
        str(small_nodes),
        tasks,
        placement,
        seed=42,
        node_cache_capable=node_cache_capable,
        restart_at=restart_at,
    )
    assert result.tasks == fill.num_tasks
    assert (result.placed == ~fill.failed).all()  # task by task, not only the total
    assert result.allocation_rate_pct == pytest.approx(fill.final.allocation_rate_pct, abs=1e-9)
    assert result.restarts == (restart_at is not None)
    assert result.latency_ms["filter"]["count"] > 0 and result.latency_ms["bind"]["count"] > 0


@pytest.mark.slow
def test_replay_command_prints_the_interface_keys(small_nodes) -> None:
    out = CliRunner().invoke(
        app,
        ["extender", "replay", "--nodes", str(small_nodes), "--seed", "42", "--json"],
    )
    assert out.exit_code == 0, out.output
    summary = json.loads(out.stdout)
    for key in ("allocation_rate_pct", "tasks", "bound", "failed", "latency_ms"):
        assert key in summary
    assert set(summary["latency_ms"]) == {"filter", "prioritize", "bind"}
    assert all({"p50", "p99"} <= set(v) for v in summary["latency_ms"].values())
    assert summary["bound"] + summary["failed"] == summary["tasks"]
    assert summary["same_decisions"] is True
    assert summary["allocation_rate_pct"] == summary["fill_allocation_rate_pct"]


def test_replay_command_rejects_restart_with_url() -> None:
    out = CliRunner().invoke(
        app, ["extender", "replay", "--url", "http://127.0.0.1:1", "--restart-at", "5"]
    )
    assert out.exit_code == 2 and "--restart-at needs the local extender" in out.output
