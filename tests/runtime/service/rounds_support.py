"""Helpers of the live round service's tests, in a module of its own: a test imports them
from here (``from rounds_support import wait_for``), never from ``conftest``, whose module
name other test folders share (which one ``import conftest`` finds depends on the order)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

from waiting import wait_for

__all__ = ["JOBS", "TRAIN", "explain", "job_body", "running_per_round", "wait_for"]

JOBS = Path(__file__).parent / "jobs"
TRAIN = f"{sys.executable} {JOBS / 'train.py'}"


def explain(service) -> Callable[[], str]:  # type: ignore[no-untyped-def]
    """What a service did, for a test that timed out: jobs, leases, last events."""

    def text() -> str:
        store = service.store
        lines = [f"jobs: {[(j.id, j.state, j.steps_done, j.reason) for j in store.jobs()]}"]
        lines += [f"lease {x.id} r{x.round} +{x.extensions} {x.end_reason}" for x in store.leases()]
        lines += [f"event {e.kind} job {e.job_id} {e.detail}" for e in store.events()[-15:]]
        lines.append(f"counters: {service.driver.counters if service.driver else None}")
        return "\n".join(lines)

    return text


def job_body(steps: float, **options: object) -> dict[str, object]:
    env = {"STEP_S": str(options.pop("step_s", 0.01))}
    env.update(options.pop("env", {}))  # type: ignore[arg-type]
    return {"command": TRAIN, "steps": steps, "env": env, **options}


def running_per_round(store) -> dict[int, set[int]]:  # type: ignore[no-untyped-def]
    """Jobs that held a lease in each round, from the store's lease table."""
    out: dict[int, set[int]] = {}
    for lease in store.leases():
        for r in range(lease.round, lease.round + lease.extensions + 1):
            out.setdefault(r, set()).add(lease.job_id)
    return out
