"""Prometheus text exposition (format 0.0.4) of the share daemon's state."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from gpumosaic.sharing.lock import GpuStatus


def _label(value: object) -> str:
    return str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def prometheus_text(
    statuses: Sequence[GpuStatus], latency_sums: Sequence[tuple[float, int]]
) -> str:
    """One exposition for all GPUs; ``latency_sums[i]`` = (sum, count) of GPU i's hand-overs."""
    lines: list[str] = []

    def family(name: str, kind: str, help_text: str) -> None:
        lines.append(f"# HELP {name} {help_text}")
        lines.append(f"# TYPE {name} {kind}")

    family("gpumosaic_share_tq_seconds", "gauge", "Time quantum of the GPU lock.")
    lines += [f'gpumosaic_share_tq_seconds{{gpu="{s.gpu}"}} {s.tq_s:g}' for s in statuses]
    family("gpumosaic_share_serialized", "gauge", "1 while work on the GPU is serialized.")
    lines += [f'gpumosaic_share_serialized{{gpu="{s.gpu}"}} {int(s.serialized)}' for s in statuses]
    family("gpumosaic_share_clients", "gauge", "Registered client processes.")
    lines += [f'gpumosaic_share_clients{{gpu="{s.gpu}"}} {len(s.clients)}' for s in statuses]
    family("gpumosaic_share_waiting", "gauge", "Clients waiting for the GPU lock.")
    lines += [f'gpumosaic_share_waiting{{gpu="{s.gpu}"}} {len(s.waiting)}' for s in statuses]
    family("gpumosaic_share_handovers_total", "counter", "Lock hand-overs between clients.")
    lines += [f'gpumosaic_share_handovers_total{{gpu="{s.gpu}"}} {s.handovers}' for s in statuses]
    family(
        "gpumosaic_share_revocations_total",
        "counter",
        "Locks taken back from a holder that did not release TQ + grace after DROP_LOCK.",
    )
    lines += [
        f'gpumosaic_share_revocations_total{{gpu="{s.gpu}"}} {s.revocations}' for s in statuses
    ]
    family("gpumosaic_share_working_set_bytes", "gauge", "Summed managed allocations.")
    lines += [
        f'gpumosaic_share_working_set_bytes{{gpu="{s.gpu}"}} {s.working_set_bytes}'
        for s in statuses
    ]
    family("gpumosaic_share_memory_bytes", "gauge", "GPU memory (as reported by a client).")
    lines += [
        f'gpumosaic_share_memory_bytes{{gpu="{s.gpu}"}} {s.memory_bytes}'
        for s in statuses
        if s.memory_bytes is not None
    ]
    family("gpumosaic_share_held_seconds_total", "counter", "Time each client held the lock.")
    for s in statuses:
        for c in s.clients:
            lines.append(
                f'gpumosaic_share_held_seconds_total{{gpu="{s.gpu}",pid="{c.pid}",'
                f'name="{_label(c.name)}"}} {c.held_s:.6f}'
            )
    family(
        "gpumosaic_share_handover_latency_seconds",
        "summary",
        "DROP_LOCK sent to LOCK_RELEASED received (the holder's drain and sync) or to revocation.",
    )
    for s, (total, count) in zip(statuses, latency_sums, strict=True):
        if s.handover_latencies_s:
            q = np.quantile(np.asarray(s.handover_latencies_s), [0.5, 0.99])
            for quantile, value in zip(("0.5", "0.99"), q, strict=True):
                lines.append(
                    f'gpumosaic_share_handover_latency_seconds{{gpu="{s.gpu}",'
                    f'quantile="{quantile}"}} {value:.6f}'
                )
        lines.append(f'gpumosaic_share_handover_latency_seconds_sum{{gpu="{s.gpu}"}} {total:.6f}')
        lines.append(f'gpumosaic_share_handover_latency_seconds_count{{gpu="{s.gpu}"}} {count}')
    return "\n".join(lines) + "\n"
