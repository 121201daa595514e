"""Packed pairs on the round service with Ray (logical GPUs): a ``_packed`` policy's pair
runs as two emulated jobs on the same GPU, each stepping at its side of Gavel's packed
rate; the service measures both rates, feeds them to the next solve, shows the pair in
``jobs``, and both jobs finish."""

from __future__ import annotations

import re
import sys
import time
from pathlib import Path

import pytest
from rounds_support import explain, wait_for

from gpumosaic.model.gpu import MILLI_PER_GPU
from gpumosaic.runtime.api.client import ServiceClient
from gpumosaic.workloads.throughputs import GavelThroughputTable

pytestmark = pytest.mark.slow  # one Ray service, ~30 s

# A pair that packs well on a V100 (each keeps ~80 % of its rate alone), so max-min
# fairness with packing runs them together.
JOB_A = "Transformer (batch size 32)"
JOB_B = "Transformer (batch size 64)"


def emulated(job_type: str, steps: float) -> dict[str, object]:
    # The shell line shows what the process saw: its GPU and its partner.
    command = (
        "echo cuda=$CUDA_VISIBLE_DEVICES partner=$GPUMOSAIC_PACKED_WITH_JOB; "
        f"exec {sys.executable} -m gpumosaic.runtime.emulate --job-type '{job_type}'"
    )
    return {"command": command, "steps": steps, "job_type": job_type}


def test_a_packed_pair_runs_on_one_gpu_and_its_rates_feed_the_solve(service_factory) -> None:  # type: ignore[no-untyped-def]
    # Rounds of 360 s job time, 3.6 s wall (time scale 100); ~1,500 s of job time each.
    service = service_factory(
        cluster="v100:1", policy="max_min_fairness_packed", round_s=360.0, time_scale=100.0
    )
    client = ServiceClient(service.url)
    a = client.submit(emulated(JOB_A, 12_000))
    b = client.submit(emulated(JOB_B, 10_000))
    shown: set[tuple[int, int | None]] = set()

    def done() -> bool:
        jobs = client.jobs()
        shown.update((j["id"], j["packed_with"]) for j in jobs if j["state"] == "running")
        return all(j["state"] in ("done", "failed", "cancelled") for j in jobs)

    deadline = time.monotonic() + 180
    wait_for(done, 180, "the pair to finish", explain(service))
    assert time.monotonic() < deadline
    assert {client.job(a)["state"], client.job(b)["state"]} == {"done"}
    assert (a, b) in shown and (b, a) in shown  # `jobs` showed the pair while it ran

    driver = service.driver
    pairs = [e for plan in service.plans for e in plan.entries if len(e.job_ids) == 2]
    assert pairs and all(set(e.job_ids) == {a, b} for e in pairs)
    # Both processes saw the pair's GPU, told each other's id.
    devices = {d for e in pairs for p in e.parts for d in service.cluster.devices(p.node, p.gpus)}
    for job, partner in ((a, b), (b, a)):
        log = Path(service.log_path(job)).read_text()
        seen = set(re.findall(r"cuda=(\d+) partner=(\d+)", log))
        assert {(str(d), str(partner)) for d in devices} & seen, log[-2000:]
        assert "packed with" in log
    # No GPU held over 1000 milli in any round (the members hold half each).
    held: dict[tuple[int, int, int], int] = {}
    for lease in service.store.leases():
        for r in range(lease.round, lease.round + lease.extensions + 1):
            for node, gpus, milli in lease.parts:
                for g in gpus:
                    held[(r, node, g)] = held.get((r, node, g), 0) + milli
    assert held and max(held.values()) <= MILLI_PER_GPU
    # The pair's rates were measured from both jobs' reports: each its side of the
    # packed rate in the table (job time), which the next solve then used.
    assert driver.counters.pair_rate_samples >= 2
    table = GavelThroughputTable.load().packed(JOB_A, 1, JOB_B, 1, "v100")
    assert table is not None
    rows = driver.row_of
    measured_a = driver.decider.pair_rates[(rows[a], rows[b], 0)]
    measured_b = driver.decider.pair_rates[(rows[b], rows[a], 0)]
    assert measured_a == pytest.approx(table[0], rel=0.15)
    assert measured_b == pytest.approx(table[1], rel=0.15)
    iso = GavelThroughputTable.load().isolated(JOB_A, 1, "v100")
    assert measured_a < 0.9 * iso  # a pair's rate, not the job's rate alone
