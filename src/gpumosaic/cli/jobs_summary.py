"""``gpumosaic jobs --summary [--json]``: a live service's run so far, summarised by the
simulations' own summary (``GET /v1/summary``): with ``--json`` the keys of
``simulate --json``'s summary (``completed``, ``failed``, ``cancelled``, ``rejected``,
``unfinished``, ``avg_jct_s``, ``makespan_s``, ``utilization``, the fairness figures...),
the same for a rounds and a Gandiva service."""

from __future__ import annotations

import json
import math

from rich.console import Console
from rich.table import Table

from gpumosaic.errors import InputError
from gpumosaic.results.summary_value import Summary
from gpumosaic.runtime.api.client import ServiceClient


def show_summary(
    server: str, token: str, json_out: bool, state: str | None, name: str | None
) -> None:
    """Print the service's summary; ``state`` and ``name`` (the list's filters) are
    refused: a summary counts every job."""
    if state is not None:
        raise InputError("a summary counts every job; leave out --state", field="--state")
    if name is not None:
        raise InputError("a summary counts every job; leave out --name", field="--name")
    answer = ServiceClient(server, token).summary()
    try:
        summary = Summary.from_json(answer)
    except ValueError as err:
        raise InputError(f"its summary is not this version's: {err}", field="--server") from None
    if json_out:
        print(json.dumps(summary.to_json()))
        return
    Console().print(summary_table(summary))


def summary_table(summary: Summary) -> Table:
    table = Table(title="the service's jobs so far")
    table.add_column("metric")
    table.add_column("value", justify="right")

    def seconds(v: float) -> str:
        return "-" if math.isnan(v) else f"{v:,.1f} s"

    def number(v: float, fmt: str = "{:,.2f}") -> str:
        return "-" if math.isnan(v) else fmt.format(v)

    ends = (
        f"{summary.completed} / {summary.failed} / {summary.cancelled} / "
        f"{summary.rejected} / {summary.unfinished}"
    )
    rows = (
        ("jobs", f"{summary.jobs}"),
        ("completed / failed / cancelled / rejected / unfinished", ends),
        ("avg JCT", seconds(summary.avg_jct_s)),
        ("p50 / p99 JCT", f"{seconds(summary.p50_jct_s)} / {seconds(summary.p99_jct_s)}"),
        ("avg queueing", seconds(summary.avg_queueing_s)),
        ("makespan", seconds(summary.makespan_s)),
        ("GPU utilization (held by leases)", number(summary.utilization, "{:.1%}")),
        ("Jain's index (1 = equal slowdowns)", number(summary.jain_index)),
    )
    for metric, value in rows:
        table.add_row(metric, value)
    return table
