"""What ``reproduce gavel`` may be asked to run, checked in plain Python (the policy
names from the registry's name table, no policy class and no numpy): the command refuses a
mistake in one line before the simulator loads, and ``run_part`` checks the same way."""

from __future__ import annotations

from collections.abc import Sequence

from gpumosaic.errors import InputError

PARTS = ("static", "continuous")
JOBS_SOURCES = ("gavel", "gpumosaic")
# Gavel's policies as its code ships them (docs/gavel.md), beside the registry's.
SHIPPED_FIFO = "fifo_as_shipped"
SHIPPED_GANDIVA = "gandiva_as_shipped"
SHIPPED = {SHIPPED_FIFO: "fifo", SHIPPED_GANDIVA: "gandiva"}


def check_request(part: str, policies: Sequence[str], jobs_source: str) -> None:
    from gpumosaic.policies.registry import POLICY_NAMES

    if part not in PARTS:
        raise InputError(f"unknown part {part!r} ({', '.join(PARTS)})", field="PART")
    known = (*POLICY_NAMES, *SHIPPED)
    for policy in policies:
        if policy not in known:
            raise InputError(
                f"unknown policy {policy!r} (known: {', '.join(known)})", field="--policies"
            )
    if jobs_source not in JOBS_SOURCES:
        raise InputError(f"must be {' or '.join(JOBS_SOURCES)}", field="--jobs-source")
