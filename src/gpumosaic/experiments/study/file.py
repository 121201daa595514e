"""The experiment file: a TOML document that declares a study.

```toml
[experiment]
name = "spatial-sharing"
kind = "simulate"              # simulate | fill | gavel | nvshare | gandiva

[grid]                         # every key a list of values (or one value); runs = product
cluster = "v100:4"
workload = "gavel:jobs=50,rate=0,milli=spatial"
placement = ["strided", "best-fit", "first-fit", "fgd"]
seed = "0-9"

[report]                       # optional
metrics = ["avg_jct_s", "utilization"]

[[reference]]                  # optional: published numbers to put ours beside
where = { placement = "fgd", seed = 0 }
metric = "avg_jct_s"
value = 316554
source = "GPU spatial sharing report"
```

Parsing is ``tomllib``; validation is pydantic, per section and per kind. Every error
names the file, the line and the key.
"""

from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from gpumosaic.errors import InputError, did_you_mean
from gpumosaic.experiments.study.kinds.base import GridError, RunKind, field_names, run_id
from gpumosaic.experiments.study.locate import KeyLines, Loc, dotted

Scalar = str | int | float | bool


class ExperimentSection(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    name: str = Field(min_length=1)
    kind: str = "simulate"
    description: str = ""


class ReportSection(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    metrics: list[str] = []  # table columns; default: the kind's
    group_by: list[str] = []  # rows of the table; default: the grid axes that vary but seed
    x: str = ""  # numeric axis of the "metric vs load" figure; default: load/rate if varied
    mosaic: dict[str, Scalar] = {}  # which run's GPU occupancy to draw (first match)
    cdf_metric: str = "jct_s"


class ReferenceValue(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    where: dict[str, Scalar] = {}  # grid values that select our runs (all must match)
    metric: str
    value: float
    source: str = ""


class ExperimentModel(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    experiment: ExperimentSection
    grid: dict[str, Any] = {}
    report: ReportSection = ReportSection()
    reference: list[ReferenceValue] = []


@dataclass(frozen=True, slots=True)
class PlannedRun:
    run_id: str
    point: Any  # the kind's point dataclass


@dataclass(frozen=True, slots=True)
class Experiment:
    path: Path
    text: str
    name: str
    description: str
    kind: RunKind
    grid: Any  # the kind's grid model
    report: ReportSection
    reference: tuple[ReferenceValue, ...]

    def runs(self) -> list[PlannedRun]:
        return [PlannedRun(run_id(self.kind.name, p), p) for p in self.kind.points(self.grid)]

    @property
    def axes(self) -> tuple[str, ...]:
        return tuple(type(self.grid).model_fields)


# At most this many runs in one study (a comparison is one too: compare writes its file).
MAX_RUNS = 100_000


def load_experiment(path: Path, check_grid: bool = True) -> Experiment:
    try:
        text = path.read_text()
    except OSError as err:
        raise InputError(f"cannot read the experiment file: {err.strerror}", path=path) from None
    except UnicodeDecodeError:
        raise InputError(
            "not a text file: an experiment file is TOML (docs/experiments.md)", path=path
        ) from None
    return parse_experiment(text, path, check_grid)


def parse_experiment(text: str, path: Path, check_grid: bool = True) -> Experiment:
    """``check_grid=False`` skips the kind's check of names and inputs (which may load a
    trace): for reading back a study that already ran."""
    from gpumosaic.experiments.study.kinds.registry import KINDS, run_kind

    lines = KeyLines(text)

    def fail(loc: Loc, message: str) -> InputError:
        line = lines.line(loc)
        where = f"line {line}, " if line is not None else ""
        return InputError(f"{where}key {dotted(loc)!r}: {message}", path=path)

    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise InputError(f"not valid TOML: {err}", path=path) from None
    _finite_numbers(raw, (), fail)
    model = _validate(ExperimentModel, raw, (), fail)
    if model.experiment.kind not in KINDS:
        hint = did_you_mean(model.experiment.kind, KINDS)
        raise fail(("experiment", "kind"), f"unknown kind{hint} (known: {', '.join(KINDS)})")
    kind = run_kind(model.experiment.kind)
    grid = _validate(kind.grid_model, model.grid, ("grid",), fail)
    try:
        if check_grid:
            kind.check(grid)
    except GridError as err:
        raise fail(("grid", err.axis) if err.axis else ("grid",), err.message) from None
    planned = len(kind.points(grid))
    if not planned:
        raise fail(("grid",), "the grid has no runs (an axis is an empty list)")
    if planned > MAX_RUNS:
        raise fail(("grid",), f"{planned:,} runs: at most {MAX_RUNS:,} (fewer seeds or values)")
    axes = tuple(type(grid).model_fields)
    metrics = field_names(kind.metrics_type)
    report = model.report
    for i, name in enumerate(report.metrics):
        if name not in metrics:
            hint = did_you_mean(name, metrics)
            raise fail(
                ("report", "metrics", i), f"unknown metric {name!r}{hint} ({', '.join(metrics)})"
            )
    for i, name in enumerate(report.group_by):
        if name not in axes:
            raise fail(("report", "group_by", i), f"not a grid axis ({', '.join(axes)})")
    if report.x and report.x not in axes:
        raise fail(("report", "x"), f"not a grid axis ({', '.join(axes)})")
    for key in report.mosaic:
        if key not in axes:
            raise fail(("report", "mosaic", key), f"not a grid axis ({', '.join(axes)})")
    for i, ref in enumerate(model.reference):
        if ref.metric not in metrics:
            hint = did_you_mean(ref.metric, metrics)
            raise fail(("reference", i, "metric"), f"unknown metric {ref.metric!r}{hint}")
        for key in ref.where:
            if key not in axes:
                raise fail(("reference", i, "where", key), f"not a grid axis ({', '.join(axes)})")
    return Experiment(
        path=path,
        text=text,
        name=model.experiment.name,
        description=model.experiment.description,
        kind=kind,
        grid=grid,
        report=report,
        reference=tuple(model.reference),
    )


def _finite_numbers(value: Any, loc: Loc, fail: Any) -> None:
    """TOML spells ``nan`` and ``inf``: no study has a use for either."""
    if isinstance(value, float) and not math.isfinite(value):
        raise fail(loc, f"must be a finite number (got {value!r})")
    if isinstance(value, dict):
        for key, item in value.items():
            _finite_numbers(item, (*loc, key), fail)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            _finite_numbers(item, (*loc, i), fail)


def _validate(model: type[BaseModel], data: Any, prefix: tuple[str, ...], fail: Any) -> Any:
    try:
        return model.model_validate(data)
    except ValidationError as err:
        # An unknown key first: a misspelt key is also the reason a required one is missing.
        errors = sorted(err.errors(), key=lambda e: e["type"] != "extra_forbidden")
        first = errors[0]
        loc = (*prefix, *first["loc"])
        message = first["msg"]
        if first["type"] == "extra_forbidden":
            known = _known(model, first["loc"][:-1])
            hint = did_you_mean(str(first["loc"][-1]), known)
            message = f"unknown key{hint} (known: {', '.join(known)})"
        elif first["type"] == "missing":
            message = "missing: this key is required"
        elif "input" in first and not isinstance(first["input"], dict | list):
            message = f"{message} (got {first['input']!r})"
        raise fail(loc, message) from None


def _known(model: type[BaseModel], loc: tuple[Any, ...]) -> list[str]:
    for part in loc:
        if not isinstance(part, str):
            continue
        annotation = model.model_fields.get(part)
        inner = getattr(annotation, "annotation", None) if annotation else None
        if isinstance(inner, type) and issubclass(inner, BaseModel):
            model = inner
        else:
            return []
    return list(model.model_fields)
