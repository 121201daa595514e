"""One validated description of a run: ``RunDescription``.

The same model serves ``gpumosaic simulate``, ``compare`` sweeps, worker processes and
experiment files (TOML): its field names are the CLI's long option names with
underscores (``--round-s`` -> ``round_s``), and every error names the option
(``InputError(field="--round-s")``), whichever way the model was built
(``RunDescription(**values)``, ``RunDescription.model_validate(mapping)``,
``RunDescription.from_values(mapping)``). ``run.build.build_parts`` turns it into objects.

Field checks happen here (ranges, known names, and through each mechanism's ``check``
the placement and sharing grammars); ``check_inputs()`` runs the cluster, workload and
background grammars (a job list's rows, an openb file's name) that the build parses
with, before anything heavy loads: a mistake in a spec string is one line, not numpy.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator, model_validator

from gpumosaic.errors import InputError, unknown_name
from gpumosaic.mode_defaults import RESOLVE_INTERVAL_S
from gpumosaic.sharing.spec import is_gandiva

DEFAULT_PLACEMENT = "fgd"
AUTO = "auto"


def flag(field_name: str) -> str:
    """The CLI option of a field: ``round_s`` -> ``--round-s``."""
    return "--" + field_name.replace("_", "-")


def input_error(err: ValidationError) -> InputError:
    """The first problem of a validation error as an InputError naming the option."""
    first = err.errors()[0]
    original = (first.get("ctx") or {}).get("error")
    if isinstance(original, InputError):
        return original
    loc = first.get("loc") or ()
    name = str(loc[0]) if loc else ""
    message = first.get("msg", str(err)).removeprefix("Value error, ")
    if first.get("type") == "extra_forbidden":
        message = f"unknown setting {name!r}"
    value = first.get("input") if first.get("type") != "extra_forbidden" else None
    if isinstance(value, Mapping):
        value = None
    return InputError(message, field=flag(name) if name else None, value=value)


class RunDescription(BaseModel):
    """Everything that defines one run (see the module doc). Frozen and hashable."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=False)

    cluster: str
    workload: str
    policy: str = "fifo"
    placement: str | None = None  # None: the mechanism's default (resolved_placement)
    seed: int = 0
    gpus_per_node: int = 1
    mechanism: str = AUTO
    backfill: bool = True
    round_s: float = 360.0
    # Gavel's 1,920 s; a live run's default is 0 s (``mode_defaults`` says why).
    resolve_interval_s: float = RESOLVE_INTERVAL_S.simulate
    sharing: str = "none"
    background: str | None = None  # TASKS[,fraction=F]: pre-filled load (sim/background)
    # Rounds only: the decider is not told the jobs' rates; it profiles each job and
    # estimates them (Gavel section 5, mechanisms/rounds/estimation.py).
    estimate_throughputs: bool = False

    def __init__(self, **values: Any) -> None:
        try:
            super().__init__(**values)
        except ValidationError as err:
            raise input_error(err) from None

    @classmethod
    def model_validate(cls, obj: Any, *args: Any, **kwargs: Any) -> RunDescription:
        try:
            return super().model_validate(obj, *args, **kwargs)
        except ValidationError as err:
            raise input_error(err) from None

    @classmethod
    def from_values(cls, values: Mapping[str, Any]) -> RunDescription:
        """From a mapping (an experiment file's table); errors name the CLI option."""
        return cls.model_validate(dict(values))

    # ---- field checks ----------------------------------------------------------------

    @model_validator(mode="before")
    @classmethod
    def _mechanism_options(cls, values: Any) -> Any:
        """``--mechanism gandiva:key=value,...``: Gandiva's options spelled with its name
        (as ``serve`` and ``sim-vs-live`` take them) are the same options as
        ``--sharing gandiva:key=value,...`` (the older spelling), and land there."""
        if not isinstance(values, Mapping):
            return values
        mechanism = values.get("mechanism")
        if not isinstance(mechanism, str) or ":" not in mechanism:
            return values
        name, _, options = mechanism.partition(":")
        if name.strip().lower() != "gandiva":
            raise InputError(
                "only gandiva takes options (gandiva:key=value,...)",
                field="--mechanism",
                value=mechanism,
            )
        sharing = str(values.get("sharing", "none"))
        if sharing.strip().lower() != "none":
            raise InputError(
                f"gandiva's options are given twice (--mechanism {mechanism} and "
                f"--sharing {sharing}): give them once",
                field="--sharing",
                value=sharing,
            )
        spec = f"gandiva:{options}" if options.strip() else "gandiva"
        from gpumosaic.mechanisms.gandiva.config import GandivaOptionError, parse_gandiva_options

        try:
            parse_gandiva_options(spec)  # a bad option names the flag it was given with
        except GandivaOptionError as err:
            raise InputError(str(err), field="--mechanism", value=mechanism) from None
        return {**values, "mechanism": "gandiva", "sharing": spec}

    @field_validator("cluster", "workload", "policy", "mechanism", "sharing")
    @classmethod
    def _not_empty(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be empty")
        return value

    @field_validator("seed")
    @classmethod
    def _seed(cls, value: int) -> int:
        if value < 0:
            raise ValueError("must be >= 0")
        return value

    @field_validator("gpus_per_node")
    @classmethod
    def _gpus_per_node(cls, value: int) -> int:
        if value < 1:
            raise ValueError("must be >= 1")
        return value

    @field_validator("round_s")
    @classmethod
    def _round_s(cls, value: float) -> float:
        if not 0 < value < math.inf:
            raise ValueError("must be a finite number > 0 of seconds")
        return value

    @field_validator("resolve_interval_s")
    @classmethod
    def _resolve_interval_s(cls, value: float) -> float:
        if not 0 <= value < math.inf:
            raise ValueError("must be a finite number >= 0 of seconds")
        return value

    @field_validator("background")
    @classmethod
    def _background(cls, value: str | None) -> str | None:
        if value is not None:
            from gpumosaic.workloads.background import BackgroundSpec

            BackgroundSpec.parse(value)
        return value

    @field_validator("mechanism")
    @classmethod
    def _mechanism(cls, value: str) -> str:
        from gpumosaic.run.registry import mechanism_names

        known = (AUTO, *mechanism_names())
        if value not in known:
            raise unknown_name("mechanism", value, known, field="--mechanism")
        return value

    @model_validator(mode="after")
    def _fits_the_mechanism(self) -> RunDescription:
        """The mechanism's own checks: the kind of --policy, --placement, --sharing."""
        from gpumosaic.run.registry import get_mechanism

        mechanism = get_mechanism(self.resolved_mechanism())
        mechanism.check(self)
        if self.estimate_throughputs and not getattr(mechanism, "estimates_throughputs", False):
            raise InputError(
                f"throughput estimation is a part of the rounds' decider (--mechanism rounds "
                f"with a Gavel policy); the {mechanism.name} mechanism would ignore it",
                field="--estimate-throughputs",
            )
        return self

    def check_inputs(self) -> None:
        """``--cluster``, ``--workload`` and ``--background`` through the build's own
        parsers, stopping short of the build (no numpy): names, options, ranges, a job
        list's every row, an openb file's name or path (its rows are read when built).
        Commands call it before a run starts, so that a mistake there costs a line, not
        the simulator's imports; the build parses them again with the same parsers. (Not
        a field check: a study may describe a run whose cluster and workload objects it
        built itself, ``run.build.build_parts``.)"""
        from gpumosaic.workloads.spec import check_cluster, parse_workload_source

        check_cluster(self.cluster, self.gpus_per_node)
        parse_workload_source(self.workload)
        if self.background is not None:
            from gpumosaic.traces.openb_files import resolve_openb
            from gpumosaic.workloads.background import BackgroundSpec

            resolve_openb(BackgroundSpec.parse(self.background).source, kind="tasks")

    # ---- resolved values -------------------------------------------------------------

    @property
    def gandiva(self) -> bool:
        """``--sharing gandiva[:...]`` (or ``--mechanism gandiva``): Gandiva's scheduler."""
        return self.resolved_mechanism() == "gandiva"

    def resolved_mechanism(self) -> str:
        """The mechanism that runs: ``--sharing gandiva:...`` asks for Gandiva (a spelling
        kept from before ``--mechanism gandiva``); ``auto`` is the first mechanism whose
        policy kind knows ``--policy`` (a queue order: event; a Gavel policy: rounds)."""
        from gpumosaic.run.registry import auto_mechanism

        if is_gandiva(self.sharing) and self.mechanism in (AUTO, "event"):
            return "gandiva"
        if self.mechanism != AUTO:
            return self.mechanism
        return auto_mechanism(self.policy)

    def resolved_placement(self) -> str:
        if self.placement is not None:
            return self.placement
        from gpumosaic.run.registry import get_mechanism

        return get_mechanism(self.resolved_mechanism()).default_placement

    def to_json(self) -> dict[str, object]:
        """The description as the JSON of ``simulate --json`` and sweeps (placement
        resolved)."""
        return {**self.model_dump(), "placement": self.resolved_placement()}
