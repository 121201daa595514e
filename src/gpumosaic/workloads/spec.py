"""Parse the command line's cluster and workload spellings into typed objects.

Cluster: ``MODEL:COUNT,...`` (e.g. ``v100:36,p100:36,k80:36``), ``openb:gpu`` /
``openb:all``, or a node CSV file (``sn,cpu_milli,memory_mib,gpu,model``).
Workload: ``gavel:key=value,...`` (jobs, rate, window, multigpu, milli, borrow),
``gavel-stream:rate=R,window=A-B[,multigpu=on]`` (Gavel's own job stream, draw for draw:
``workloads/gavel_stream.py``), ``gavel-trace:PATH``, ``openb:NAME`` (an Alibaba task list
replayed in time) or a job-list file (.csv/.yaml).

Two steps, one grammar: ``parse_workload_source(spec)`` checks a ``--workload`` (options,
ranges, a job list's every row) in plain Python -- no numpy, so a mistake's one line is
quick -- and ``build_workload(source, seed)`` makes the jobs from what it returned
(``parse_workload`` does both). ``parse_cluster`` is plain Python for ``MODEL:COUNT``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from gpumosaic.errors import InputError, did_you_mean
from gpumosaic.model.cluster import ClusterSpec
from gpumosaic.model.gpu import UnknownGpuModelError
from gpumosaic.options import parse_options
from gpumosaic.workloads.gavel_config import GavelWorkloadConfig
from gpumosaic.workloads.throughputs import (
    BORROWED_RATES,
    ConstantThroughputs,
    GavelThroughputTable,
)
from gpumosaic.workloads.workload import Workload

if TYPE_CHECKING:  # the job-list reader (yaml, a pydantic model) loads for a job list only
    from gpumosaic.traces.joblist import JobList
    from gpumosaic.workloads.gavel_stream import GavelStreamOptions
    from gpumosaic.workloads.openb_options import OpenbReplayOptions


def is_node_list(spec: str) -> bool:
    """``openb:gpu`` or a node CSV, rather than ``MODEL:COUNT,...``."""
    text = spec.strip()
    return text.startswith("openb:") or Path(text).suffix.lower() == ".csv"


def check_cluster(spec: str, gpus_per_node: int = 1) -> None:
    """``--cluster``'s grammar, refused as ``parse_cluster`` refuses it, in plain Python; a
    node list is found (its name or path) here and read (with numpy) when the run is
    built."""
    if is_node_list(spec):
        from gpumosaic.traces.openb_files import resolve_openb

        _node_list_servers(spec.strip(), gpus_per_node)
        resolve_openb(spec.strip(), kind="nodes")
    else:
        parse_cluster(spec, gpus_per_node)


def _node_list_servers(text: str, gpus_per_node: int) -> None:
    if gpus_per_node != 1:
        raise InputError(
            f"a node list ({text}) already says how many GPUs each server has: "
            "drop --gpus-per-node",
            field="--gpus-per-node",
            value=gpus_per_node,
        )


def parse_cluster(spec: str, gpus_per_node: int = 1) -> ClusterSpec:
    text = spec.strip()
    if is_node_list(text):
        from gpumosaic.traces.openb import load_openb_nodes

        _node_list_servers(text, gpus_per_node)
        return load_openb_nodes(text)
    counts: list[tuple[str, int]] = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        model, sep, count = part.partition(":")
        if not sep or not count.strip().isdigit():
            raise InputError(
                f"cluster part {part!r} is not MODEL:COUNT (e.g. v100:4)", field="--cluster"
            )
        counts.append((model, int(count)))
    if not counts:
        raise InputError("empty cluster spec", field="--cluster")
    uneven = [f"{m}:{c}" for m, c in counts if c % gpus_per_node]
    if uneven:
        raise InputError(
            f"{', '.join(uneven)} does not divide into servers of {gpus_per_node} GPUs",
            field="--gpus-per-node",
            value=gpus_per_node,
        )
    try:
        return ClusterSpec.from_counts(counts, gpus_per_node=gpus_per_node)
    except (UnknownGpuModelError, ValueError) as err:
        raise InputError(str(err), field="--cluster") from None


@dataclass(frozen=True, slots=True)
class ParsedWorkload:
    workload: Workload
    job_list: JobList | None = None  # set when it came from our job-list format


WORKLOAD_KINDS = ("gavel", "gavel-trace", "gavel-stream", "openb")


@dataclass(frozen=True, slots=True)
class WorkloadSource:
    """A checked ``--workload``: what ``build_workload`` makes the jobs from. One of the
    kind's fields is set: ``gavel`` (its options), ``stream`` (gavel-stream's), ``trace``
    (a Gavel trace, read), ``openb`` (the task list and its replay options) or
    ``job_list`` (read, every row checked)."""

    text: str
    gavel: GavelOptions | None = None
    stream: GavelStreamOptions | None = None
    trace: Workload | None = None
    openb: tuple[str, OpenbReplayOptions] | None = None
    job_list: JobList | None = None


def parse_workload(spec: str, seed: int) -> ParsedWorkload:
    return build_workload(parse_workload_source(spec), seed)


def parse_workload_source(spec: str) -> WorkloadSource:
    """``--workload``'s grammar, every refusal one ``InputError`` naming ``--workload`` (or
    the file, row and field of a job list); plain Python (no numpy). An openb task list
    is found here and read when the workload is built (its reader is numpy's)."""
    text = spec.strip()
    kind, sep, rest = text.partition(":")
    if sep and kind == "gavel":
        return WorkloadSource(text, gavel=_gavel_options(rest))
    if sep and kind == "gavel-stream":
        from gpumosaic.workloads.gavel_stream import parse_gavel_stream_options

        return WorkloadSource(text, stream=parse_gavel_stream_options(rest))
    if sep and kind == "gavel-trace":
        from gpumosaic.workloads.gavel_trace import gavel_trace_workload

        return WorkloadSource(text, trace=gavel_trace_workload(rest))
    if sep and kind == "openb":
        from gpumosaic.traces.openb_files import resolve_openb
        from gpumosaic.workloads.openb_options import parse_openb_replay

        task_list, options = parse_openb_replay(text)
        resolve_openb(task_list, kind="tasks")  # the name (or path) here, the rows when built
        return WorkloadSource(text, openb=(task_list, options))
    path = Path(text)
    if path.suffix.lower() == ".trace":
        return parse_workload_source(f"gavel-trace:{text}")
    if path.suffix.lower() in (".csv", ".yaml", ".yml"):
        from gpumosaic.traces.joblist import load_job_list

        job_list = load_job_list(path)
        _check_job_types(job_list)
        return WorkloadSource(text, job_list=job_list)
    hint = did_you_mean(kind, WORKLOAD_KINDS) if sep else ""
    raise InputError(
        f"unknown workload{hint}: use gavel:..., gavel-trace:PATH, gavel-stream:..., "
        "openb:NAME or a .csv/.yaml job list",
        field="--workload",
        value=text,
    )


def build_workload(source: WorkloadSource, seed: int) -> ParsedWorkload:
    """The jobs of a checked ``--workload`` (``parse_workload_source``), drawn from
    ``seed`` where they are generated."""
    if source.gavel is not None:
        return ParsedWorkload(_gavel(source.gavel, source.text.partition(":")[2], seed))
    if source.stream is not None:
        from gpumosaic.workloads.gavel_stream import gavel_stream_from_options

        return ParsedWorkload(gavel_stream_from_options(source.stream, seed))
    if source.trace is not None:
        return ParsedWorkload(source.trace)
    if source.openb is not None:
        from gpumosaic.workloads.openb_replay import openb_time_workload

        return ParsedWorkload(openb_time_workload(source.text, seed))
    job_list = source.job_list
    assert job_list is not None  # parse_workload_source sets one of the fields
    throughputs = GavelThroughputTable.load() if job_list.uses_steps else ConstantThroughputs()
    name = Path(source.text).name
    return ParsedWorkload(Workload(name, job_list.jobs, throughputs), job_list)


def _check_job_types(job_list: JobList) -> None:
    """Every job type a job list names is one of Gavel's table (steps need its rates; a
    label the table lacks would silently get none, e.g. under measured sharing). A job
    without one (duration_s, no job_type column) is ``job``."""
    for job in job_list.jobs:
        if job.job_type != "job" or job_list.uses_steps:
            try:
                check_job_type(job.job_type)
            except InputError as err:
                raise InputError(
                    err.message, path=job_list.path, row=job_list.row(job.id), field="job_type"
                ) from None


def check_job_type(name: str, field: str | None = None) -> None:
    """A job type must be one of Gavel's throughput table (its speeds come from there):
    an unknown one is an InputError with the nearest known name (``field``: the flag or
    column it came from)."""
    known = GavelThroughputTable.load().job_types
    if name not in known:
        hint = did_you_mean(name, known)
        raise InputError(
            f"unknown job type {name!r}{hint}; Gavel's throughput table lists them "
            "(docs/joblist.md)",
            field=field,
            value=name if field is not None and field.startswith("-") else None,
        )


@dataclass(frozen=True, slots=True)
class GavelOptions:
    """The options of ``gavel:...`` (docs: README, "Workloads")."""

    jobs: int | None = None
    rate: float = 0.0
    window: tuple[int, int] | None = None
    multigpu: bool = False
    milli: Literal["spatial", "none"] = "none"
    # GPU models Gavel never measured take the documented borrowed rates
    # (workloads/throughputs.py BORROWED_RATES, docs/gavel.md); off: they get no rate.
    borrow: bool = True

    def config(self) -> GavelWorkloadConfig:
        return GavelWorkloadConfig(
            jobs=self.jobs,
            rate_per_hour=self.rate,
            window=self.window,
            multigpu=self.multigpu,
            spatial_milli=self.milli == "spatial",
        )


def _gavel_options(args: str) -> GavelOptions:
    """``gavel:``'s options, and the generator's own checks of them."""
    options = parse_options(GavelOptions, args, what="gavel workload option", flag="--workload")
    try:
        options.config()
    except ValueError as err:
        raise InputError(f"gavel workload: {err}", field="--workload") from None
    return options


def _gavel(options: GavelOptions, args: str, seed: int) -> Workload:
    from gpumosaic.workloads.gavel import GavelGenerator

    config = options.config()
    table = GavelThroughputTable.load()
    name = f"gavel:{args}"
    generator = GavelGenerator(config, table, seed)
    jobs_source = generator if config.jobs is None else tuple(generator)
    rates = table.borrowing(BORROWED_RATES) if options.borrow else table
    return Workload(name, jobs_source, rates, measure=config.window)
