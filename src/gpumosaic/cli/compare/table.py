"""The placement comparison's table: one row per placement (or placement + sharing
model) over seeds, printed with rich, and the notes a reader needs beside it (placements
that decided identically on every seed, and why)."""

from __future__ import annotations

import math

import numpy as np
from rich.table import Table

from gpumosaic.cli.tables import show
from gpumosaic.experiments.sweeps.runs import SweepRun
from gpumosaic.model.cluster import ClusterSpec


def common_job_ids(by_label: dict[str, list[SweepRun]]) -> list[frozenset[int]]:
    """Per seed (the i-th run of every label): the jobs that every compared run completed."""
    runs = list(by_label.values())
    return [
        frozenset.intersection(*(mine[i].completed_ids for mine in runs))
        for i in range(len(runs[0]))
    ]


def table_rows(
    by_label: dict[str, list[SweepRun]], common_jobs: bool = False
) -> list[dict[str, float | str | int]]:
    """One row per label, means over its seeds. ``common_jobs``: the JCT columns average
    over the jobs that every compared run of the same seed completed (``--common-jobs``)."""
    labels = list(by_label)
    common = common_job_ids(by_label) if common_jobs else None

    def avg_jcts(mine: list[SweepRun]) -> np.ndarray:
        if common is None:
            return np.array([r.summary.avg_jct_s for r in mine])
        return np.array(
            [
                float(np.mean(j)) if len(j := r.jct_of(c)) else math.nan
                for r, c in zip(mine, common, strict=True)
            ]
        )

    base_mean = float(np.mean(avg_jcts(by_label[labels[0]])))
    rows: list[dict[str, float | str | int]] = []
    for label, mine in by_label.items():
        avg = avg_jcts(mine)

        def mean(key: str, mine: list[SweepRun] = mine) -> float:
            values = np.array([getattr(r.summary, key) for r in mine], dtype=float)
            return float(np.nanmean(values)) if np.isfinite(values).any() else math.nan

        row: dict[str, float | str | int] = {
            "placement": label,
            "seeds": len(mine),
            "completed_mean": mean("completed"),
            "rejected_mean": mean("rejected"),
            "unfinished_mean": mean("unfinished"),
            "avg_jct_s_mean": float(avg.mean()),
            "avg_jct_s_sd": float(avg.std(ddof=1)) if len(avg) > 1 else 0.0,
            "p99_jct_s_mean": mean("p99_jct_s"),
            "makespan_s_mean": mean("makespan_s"),
            "utilization_mean": mean("utilization"),
            "fragmentation_rate_mean": mean("fragmentation_rate_mean"),
            "ftf_rho_max_mean": mean("ftf_rho_max"),
            "jain_index_mean": mean("jain_index"),
            f"vs_{labels[0]}_pct": 100.0 * (float(avg.mean()) - base_mean) / base_mean,
        }
        if common is not None:
            row["common_jobs_mean"] = float(np.mean([len(c) for c in common]))
        rows.append(row)
    return rows


def different_jobs_warning(by_label: dict[str, list[SweepRun]], common_jobs: bool = False) -> str:
    """One line when runs of the same seed completed different jobs: their averages are
    then over different job sets (a placement that never starts the big jobs looks fast).
    With ``common_jobs`` (the averages are over the common jobs already) it says so,
    instead of suggesting the option in use."""
    runs = list(by_label.items())
    seeds = len(runs[0][1])
    differ = [i for i in range(seeds) if len({mine[i].completed_ids for _, mine in runs}) > 1]
    if not differ:
        return ""
    i = differ[0]
    counts = ", ".join(f"{label} {len(mine[i].completed_ids)}" for label, mine in runs)
    common = len(common_job_ids(by_label)[i])
    what = (
        f"the {common} jobs every run completed (--common-jobs); the other columns "
        "(done, makespan, utilization) are each run's own"
        if common_jobs
        else "its own jobs; --common-jobs averages over the jobs every run completed"
    )
    return (
        f"the compared runs completed different jobs ({len(differ)} of {seeds} seeds; "
        f"seed {runs[0][1][i].request.seed}: {counts} measured jobs completed, {common} by "
        f"all): each JCT average is over {what}"
    )


def identical_notes(by_label: dict[str, list[SweepRun]], cluster: ClusterSpec) -> list[str]:
    """Say when two placements decided identically on every seed, and why that happens on
    one-GPU servers: a newcomer would otherwise conclude that one of them does nothing."""
    groups: dict[tuple[float, ...], list[str]] = {}
    for label, mine in by_label.items():
        key = tuple(float(np.round(np.sum(r.jcts_s), 6)) for r in mine)
        groups.setdefault(key, []).append(label)
    notes = []
    one_gpu = all(node.num_gpus == 1 for node in cluster.nodes)
    for labels in groups.values():
        if len(labels) < 2:
            continue
        seeds = len(by_label[labels[0]])
        note = f"note: {' and '.join(labels)} gave identical results on all {seeds} seeds"
        if one_gpu:
            note += (
                ": every server has one GPU, so choosing a server is choosing a GPU, and on "
                "these jobs their choices coincided (the least-fragmenting GPU was the "
                "fullest that fits); with several GPUs per server they can differ: try "
                "--gpus-per-node 4"
            )
        notes.append(note)
    return notes


def print_table(rows: list[dict[str, float | str | int]], title: str) -> None:
    table = Table(title=title)
    base_key = next(k for k in rows[0] if str(k).startswith("vs_"))
    for column in (
        "placement",
        "seeds",
        "done",
        "rejected",
        "unfinished",
        "avg JCT (h)",
        "sd (h)",
        "p99 JCT (h)",
        "makespan (h)",
        "util",
        "frag rate",
        "max rho",
        "vs " + base_key.removeprefix("vs_").removesuffix("_pct") + " %",
    ):
        table.add_column(column, justify="left" if column == "placement" else "right")

    def h(value: float | str | int) -> str:
        v = float(value)
        return "-" if math.isnan(v) else f"{v / 3600:,.2f}"

    for row in rows:
        table.add_row(
            str(row["placement"]),
            str(row["seeds"]),
            _count(row["completed_mean"]),
            _count(row["rejected_mean"]),
            _count(row["unfinished_mean"]),
            h(row["avg_jct_s_mean"]),
            h(row["avg_jct_s_sd"]),
            h(row["p99_jct_s_mean"]),
            h(row["makespan_s_mean"]),
            f"{float(row['utilization_mean']):.1%}",
            f"{float(row['fragmentation_rate_mean']):.1%}",
            f"{float(row['ftf_rho_max_mean']):.2f}",
            f"{float(row[base_key]):+.1f}",
        )
    show(table, ("placement",))


def _count(value: float | str | int) -> str:
    """A mean count over seeds: whole when it is."""
    v = float(value)
    return f"{v:,.0f}" if v == round(v) else f"{v:,.1f}"


def comparison_title(
    policy: str, cluster: str, workload: str, sharings: list[str], background: str | None
) -> str:
    """What a comparison's table and figures are of: the policy, cluster, workload, the
    background load (a pre-filled cluster changes everything) and the one sharing model
    (several: each label names its own)."""
    title = f"{policy} on {cluster}, {workload}"
    if background is not None:
        title += f", background {background}"
    if len(sharings) == 1 and sharings[0] != "none":
        title += f", sharing {sharings[0]}"
    return title
