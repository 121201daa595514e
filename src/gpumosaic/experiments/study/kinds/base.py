"""What a run kind is: a grid model (pydantic, one list per axis), the point it expands
to (a frozen dataclass: the run's configuration) and the function that runs points.

The result of a run is a ``RunProduct``: its configuration, its summary metrics (a frozen
dataclass: one column each in the store's run table) and its tables (jobs, timeline,
placements), in the columnar form the store writes as Parquet.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Hashable, Sequence
from dataclasses import asdict, fields
from importlib.util import find_spec
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

if TYPE_CHECKING:
    pass
# A study's store is Parquet (the parquet extra). Looked up, not imported: pyarrow loads
# when a table is built, not when an experiment file is read or found faulty.
if find_spec("pyarrow") is None:
    from gpumosaic.errors import InputError

    raise InputError("studies store Parquet tables: pip install 'gpumosaic[parquet]'")
from pydantic import BaseModel, ConfigDict, ValidationInfo, field_validator

from gpumosaic.experiments.results.product import (
    ARRIVED_AXIS,
    TIME_AXIS,
    NamedTable,
    RunProduct,
)

__all__ = ["ARRIVED_AXIS", "TIME_AXIS", "NamedTable", "RunProduct"]


class GridModel(BaseModel):
    """A grid: every field is a list of values (a single value is a one-item list)."""

    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True)

    @field_validator("*", mode="before")
    @classmethod
    def _listify(cls, value: Any, info: ValidationInfo) -> Any:
        values = list(value) if isinstance(value, list | tuple) else [value]
        if info.field_name == "seed":  # "0-9" and "0,3,5" as in --seeds
            from gpumosaic.experiments.sweeps.runs import parse_seeds

            out: list[Any] = []
            for item in values:
                out.extend(parse_seeds(item) if isinstance(item, str) else [item])
            return out
        return values


class RunKind(Protocol):
    name: ClassVar[str]
    grid_model: ClassVar[type[GridModel]]
    metrics_type: ClassVar[type]
    default_metrics: ClassVar[tuple[str, ...]]  # the report table's columns

    def points(self, grid: Any) -> list[Any]:
        """Every point of the grid, in a stable order, without duplicates."""
        ...

    def check(self, grid: Any) -> None:
        """Reject names and specs that cannot run (``GridError`` naming the axis)."""
        ...

    def batch_key(self, point: Any) -> Hashable:
        """Points with the same key run together in one task (``run``)."""
        ...

    def run(self, points: Sequence[Any]) -> list[RunProduct]: ...


class GridError(ValueError):
    """A grid value that cannot run: ``axis`` is the grid key it came from."""

    def __init__(self, axis: str, message: str) -> None:
        super().__init__(message)
        self.axis = axis
        self.message = message


def run_id(kind: str, point: Any) -> str:
    """Stable id of a run: a hash of its kind and configuration. An axis added later (its
    point class lists it in ``ID_OMITS_WHEN_NONE``) is left out of the hash while unset,
    so that the runs stored before it existed keep their ids."""
    values = asdict(point)
    for name in getattr(type(point), "ID_OMITS_WHEN_NONE", ()):
        if values.get(name) is None:
            values.pop(name, None)
    payload = json.dumps({"kind": kind, **values}, sort_keys=True, default=str)
    return hashlib.sha1(payload.encode()).hexdigest()[:12]


def field_names(cls: type) -> tuple[str, ...]:
    return tuple(f.name for f in fields(cls))


def unique(points: list[Any]) -> list[Any]:
    return list(dict.fromkeys(points))
