"""Where the extender's cluster comes from and where its binds go: the contract that the
SQLite store (standalone ``--cluster``) and the API server (``kubernetes``) both meet.

Both hand the service the same things: the nodes, and the bound pods as API JSON, whose
``alibabacloud.com/gpu-index`` annotations say which GPU slots each holds. The service
rebuilds every GPU's occupancy from those alone, so a restart loses nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from gpumosaic.apps.extender.vocabulary import NodeReading, PodRequest

RngState = Mapping[str, Any]  # numpy's bit_generator.state (JSON-able)


class BindError(RuntimeError):
    """The bind could not be recorded (API error, no room in the recorded state); the
    message says why. Answered as a logical failure (200 with ``Error``)."""


class StateUnavailable(BindError):
    """The state cannot be written at all (database read-only, disk full, locked): the
    service is unhealthy until a write succeeds again. Answered with HTTP 503."""


@dataclass(frozen=True, slots=True)
class Snapshot:
    """Nodes and bound pods (in bind order where known) at start, plus the random
    generator's saved states (SQLite only; None from the API server)."""

    nodes: tuple[NodeReading, ...]
    pods: tuple[dict[str, Any], ...]
    rng_initial: RngState | None = None
    rng_current: RngState | None = None


class Backend(Protocol):
    kind: str  # "sqlite" or "kubernetes", shown in /state
    releases_by_request: bool  # True: pods are released through the extender (standalone)

    def load(self) -> Snapshot: ...

    def save_rng_initial(self, state: RngState) -> None: ...

    def bind(
        self,
        request: PodRequest,
        node: str,
        annotations: dict[str, str],
        rng_state: RngState,
    ) -> None:
        """Write ``annotations`` on the pod, then bind it to ``node``; BindError if not."""
        ...

    def release(self, key: str) -> None:
        """Forget a pod's share; StateUnavailable if that cannot be recorded."""
        ...

    def health(self) -> str:
        """'' while the state can be written, else why not (for /healthz)."""
        ...

    def read_pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        """The pod as API JSON, for a bind of a pod this process never filtered."""
        ...
