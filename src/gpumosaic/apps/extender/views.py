"""The read-only ``/state`` document: every node's GPUs and the pods on them."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gpumosaic.apps.extender.service import ExtenderService


def state_document(service: ExtenderService) -> dict[str, Any]:
    held = service.held()
    with service._lock:
        table = service.nodes
        s = table.state
        on_gpu: dict[tuple[int, int], list[str]] = {}
        cpu_only: dict[int, list[str]] = {}
        untracked: list[str] = []
        for request, a, is_untracked in held:
            if is_untracked:
                untracked.append(request.label)
            if a.gpus:
                for g in a.gpus:
                    on_gpu.setdefault((a.node, g), []).append(f"{request.label}:{a.gpu_milli}")
            else:
                cpu_only.setdefault(a.node, []).append(request.label)
        nodes = []
        for n, name in enumerate(table.names):
            gpus = [
                {
                    "index": g,
                    "milli_free": int(s.gpu_free[n, g]),
                    "pods": on_gpu.get((n, g), []),
                }
                for g in range(int(s.num_gpus[n]))
            ]
            nodes.append(
                {
                    "name": name,
                    "gpu_model": table.readings[n].spec.gpu.name if len(gpus) else None,
                    "gpus": gpus,
                    "cpu_milli_free": int(s.cpu_free[n]),
                    "cpu_milli": int(s.cpu_capacity[n]),
                    "memory_mib_free": int(s.memory_free[n]),
                    "memory_mib": int(s.memory_capacity[n]),
                    "pods_without_gpu": cpu_only.get(n, []),
                }
            )
        target = service.target
        workload = target.workload
        counters = service.counters
        return {
            "placement": service.placement,
            "backend": service.backend.kind,
            "target_workload": {
                "source": "window" if target.learned else "fixed",
                "window_pods": target.window_len if target.learned else None,
                "classes": 0 if workload is None else len(workload.classes),
            },
            "gpu_milli_capacity": s.total_gpu_milli,
            "gpu_milli_allocated": s.allocated_gpu_milli,
            "pods_bound": len(held),
            "unknown_gpu_models": list(table.unknown_models),
            "untracked_gpu_pods": untracked,
            "counters": {
                "node_fallbacks": counters.node_fallbacks,
                "gpu_fallbacks": counters.gpu_fallbacks,
                "bind_rejected": counters.bind_rejected,
                "bind_errors": counters.bind_errors,
                "adopt_conflicts": counters.adopt_conflicts,
                "unreadable_pods": counters.unreadable_pods,
                "dropped_pods": counters.dropped_pods,
                "rebuilds": counters.rebuilds,
                "conflicts": list(counters.conflicts),
            },
            "nodes": nodes,
        }
