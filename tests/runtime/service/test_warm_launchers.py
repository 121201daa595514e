"""The service on warm launchers (one launcher actor per Ray node): jobs run to done and
a command that cannot start fails after its retries with its reason, on the test Ray."""

from __future__ import annotations

import pytest
from rounds_support import explain, job_body, wait_for

from gpumosaic.runtime.api.client import ServiceClient
from gpumosaic.runtime.executors.warm_ray import WarmRayExecutor


def all_final(client: ServiceClient) -> bool:
    return all(j["state"] in ("done", "failed", "cancelled") for j in client.jobs())


@pytest.mark.slow
def test_jobs_run_on_warm_launchers_and_a_bad_command_fails(service_factory) -> None:  # type: ignore[no-untyped-def]
    service = service_factory(warm_launchers=True, max_retries=1, round_s=2.0)
    assert isinstance(service.executor, WarmRayExecutor)
    client = ServiceClient(service.url)
    good = [client.submit(job_body(40)) for _ in range(3)]
    bad = client.submit({"command": "/no/such/binary --train", "steps": 10})
    wait_for(lambda: all_final(client), 120, "the jobs to end", explain(service))
    for job in good:
        assert client.job(job)["state"] == "done"
        assert client.job(job)["steps_done"] == 40
    failed = client.job(bad)
    assert failed["state"] == "failed" and failed["attempts"] == 2
    assert "cannot start" in failed["reason"] and "No such file" in failed["reason"]
    assert "cannot start" in client.logs(bad, 2000)
