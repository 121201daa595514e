"""One run from its description: kept for the names code already uses.

``RunRequest`` is ``run.description.RunDescription`` (the validated model; same fields,
same keyword construction); ``run_request`` is ``run.build.run``. The same function
serves ``simulate`` and every sweep worker process, so a sweep's runs are exactly what
``simulate`` would do with the same arguments.
"""

from __future__ import annotations

from collections.abc import Callable

from gpumosaic.results.run_outcome import RunOutcome
from gpumosaic.run.build import run
from gpumosaic.run.description import DEFAULT_PLACEMENT, RunDescription
from gpumosaic.sharing.spec import is_gandiva

RunRequest = RunDescription
# Spellings of --mechanism (the registry in run/mechanisms has the plug-ins).
MECHANISMS = ("auto", "event", "rounds", "gandiva")


def run_request(request: RunRequest, progress: Callable[[float], None] | None = None) -> RunOutcome:
    return run(request, progress)


__all__ = [
    "DEFAULT_PLACEMENT",
    "MECHANISMS",
    "RunOutcome",
    "RunRequest",
    "is_gandiva",
    "run_request",
]
