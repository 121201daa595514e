"""The placement comparison's table: one row per placement (or placement + sharing
model) over seeds, printed with rich, and the notes a reader needs beside it (placements
that decided identically on every seed, and why)."""

from __future__ import annotations

import math

import numpy as np
from rich.console import Console
from rich.table import Table

from gpumosaic.experiments.sweeps.runs import SweepRun
from gpumosaic.model.cluster import ClusterSpec


def table_rows(by_label: dict[str, list[SweepRun]]) -> list[dict[str, float | str | int]]:
    labels = list(by_label)
    base = [r.summary.avg_jct_s for r in by_label[labels[0]]]
    base_mean = float(np.mean(base))
    rows: list[dict[str, float | str | int]] = []
    for label, mine in by_label.items():
        avg = np.array([r.summary.avg_jct_s for r in mine])

        def mean(key: str, mine: list[SweepRun] = mine) -> float:
            values = np.array([getattr(r.summary, key) for r in mine], dtype=float)
            return float(np.nanmean(values)) if np.isfinite(values).any() else math.nan

        rows.append(
            {
                "placement": label,
                "seeds": len(mine),
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
        )
    return rows


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
            h(row["avg_jct_s_mean"]),
            h(row["avg_jct_s_sd"]),
            h(row["p99_jct_s_mean"]),
            h(row["makespan_s_mean"]),
            f"{float(row['utilization_mean']):.1%}",
            f"{float(row['fragmentation_rate_mean']):.1%}",
            f"{float(row['ftf_rho_max_mean']):.2f}",
            f"{float(row[base_key]):+.1f}",
        )
    console = Console()
    # Wide enough for the whole table even when stdout is not a terminal (make demo | tee).
    Console(width=max(console.width, 120)).print(table)
