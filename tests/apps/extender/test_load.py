"""A short bounded load on loopback (8 clients, ~3 s): no errors, the books stay right.
The 60 s version with throughput and memory is bench/bench_extender.py."""

from __future__ import annotations

from pathlib import Path

from extender_builders import cluster, service

from gpumosaic.apps.extender.app import create_app
from gpumosaic.apps.extender.loadgen import run_load
from gpumosaic.apps.extender.server import start_in_thread


def test_eight_clients_for_a_few_seconds(tmp_path: Path) -> None:
    spec = cluster(*[("V100", 8)] * 6, *[("T4", 2)] * 6)
    svc = service(spec, tmp_path / "s.db")
    server = start_in_thread(create_app(svc))
    try:
        result = run_load(server.url, [n.name for n in spec.nodes], clients=8, duration_s=3.0)
    finally:
        server.stop()
    assert result.errors == 0
    # Pods went through; how many in 3 s depends on the machine (bench/bench_extender.py
    # measures it), so only that some did is asserted.
    assert result.cycles > 0
    svc.check_invariants()
    assert svc.held() == []  # every bound pod was released again
    assert svc.nodes.state.allocated_gpu_milli == 0
