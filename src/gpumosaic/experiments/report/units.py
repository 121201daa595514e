"""How the report names a metric and in which unit it shows it: as the CLI prints it.

``gpumosaic simulate`` prints "avg JCT 3.21 h", "GPU utilization 71.4%"; the study stores
``avg_jct_s = 11556.0`` and ``utilization = 0.714``. The report shows the CLI's words and
units (hours, %) in its tables, axes and hover texts, converting the stored values with
``Display.scale``. Names the table below does not list are read from their suffix:
``_s`` seconds, ``_h`` hours, ``_pct`` percent, ``_kw`` kW, ``_kwh`` kWh; a trailing
``_90`` is the arrived-workload point of a fill replay ("at 90% arrived").
"""

from __future__ import annotations

import re
from dataclasses import dataclass

HOUR_S = 3600.0


@dataclass(frozen=True, slots=True)
class Display:
    """A metric as shown: ``label`` (words and unit), stored value x ``scale``."""

    name: str
    words: str
    unit: str  # "h", "%", "s", "kW", "kWh" or "" (a count or a plain number)
    scale: float = 1.0

    @property
    def label(self) -> str:
        return f"{self.words} ({self.unit})" if self.unit else self.words

    def value(self, stored: float) -> float:
        return stored * self.scale


# The words `gpumosaic simulate` prints (cli/simulate.py) and its units.
_KNOWN: dict[str, tuple[str, str, float]] = {
    "avg_jct_s": ("avg JCT", "h", 1 / HOUR_S),
    "p50_jct_s": ("p50 JCT", "h", 1 / HOUR_S),
    "p95_jct_s": ("p95 JCT", "h", 1 / HOUR_S),
    "p99_jct_s": ("p99 JCT", "h", 1 / HOUR_S),
    "avg_queueing_s": ("avg queueing", "h", 1 / HOUR_S),
    "makespan_s": ("makespan", "h", 1 / HOUR_S),
    "avg_jct_h": ("avg JCT", "h", 1.0),
    "makespan_h": ("makespan", "h", 1.0),
    "end_h": ("end", "h", 1.0),
    "utilization": ("GPU utilization", "%", 100.0),
    "fragmentation_rate_mean": ("fragmentation rate (time avg)", "%", 100.0),
    "energy_kwh": ("energy", "kWh", 1.0),
    "ftf_rho_mean": ("finish-time fairness rho (mean)", "", 1.0),
    "ftf_rho_max": ("finish-time fairness rho (max)", "", 1.0),
    "avg_slowdown": ("slowdown (mean)", "", 1.0),
    "slowdown_p99": ("slowdown (p99)", "", 1.0),
    "slowdown_max": ("slowdown (max)", "", 1.0),
    "jain_index": ("Jain's index (1 = equal slowdowns)", "", 1.0),
    "elapsed_s": ("wall time", "s", 1.0),
    "cpu_s": ("CPU time", "s", 1.0),
    "wall_s": ("wall time", "s", 1.0),
    "policy_solve_s": ("policy solve time", "s", 1.0),
    # Gandiva's reproduction prints these as percentages (reproductions/gandiva.py).
    "busy": ("busy GPUs", "%", 100.0),
    "effective": ("effective utilization", "%", 100.0),
    "suspended_share": ("suspended share", "%", 100.0),
    "total_s": ("completion time of both jobs", "s", 1.0),
}

_SUFFIX_UNITS = (("_pct", "%"), ("_kwh", "kWh"), ("_kw", "kW"), ("_s", "s"), ("_h", "h"))
_AT_ARRIVED = re.compile(r"^(?P<base>.+)_(?P<at>\d+|final)$")


def display(name: str) -> Display:
    known = _KNOWN.get(name)
    if known is not None:
        return Display(name, *known)
    base, at = name, ""
    m = _AT_ARRIVED.match(name)
    if m and any(m["base"].endswith(s) for s, _ in _SUFFIX_UNITS):
        base, at = m["base"], m["at"]
    unit = ""
    for suffix, u in _SUFFIX_UNITS:
        if base.endswith(suffix):
            base, unit = base[: -len(suffix)], u
            break
    words = base.replace("_", " ")
    if at:
        words += " at the end" if at == "final" else f" at {at}% arrived"
    return Display(name, words, unit)
