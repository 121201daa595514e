"""The bounds of every number a user types on a command line, in one table.

``user_errors`` (cli/app.py) checks a command's numeric options against this table
before the command body runs, so an out-of-range count (``--workers -1``, a seed past
numpy's range) is one line naming the flag, whatever command it was given to.
tests/cli/test_option_bounds.py walks every command's options: each int or float
option must have an entry here, and a value past either bound must be refused.

Counts inside a text value are bounded where they are parsed: ``--seeds`` (at most
``MAX_SEEDS``, experiments/sweeps/runs.py), a study's grid (at most ``MAX_RUNS`` runs,
experiments/study/file.py), ``--rates`` (``MAX_RATES``, below).
"""

from __future__ import annotations

from dataclasses import dataclass

from gpumosaic.errors import InputError

MAX_RATES = 100  # arrival rates of one policy sweep


@dataclass(frozen=True, slots=True)
class Bound:
    low: float
    high: float
    low_open: bool = False  # True: the value must be > low (not >= low)
    wanted: str = ""  # the error's words where the bounds alone say too little

    def check(self, value: float, flag: str) -> None:
        low_ok = value > self.low if self.low_open else value >= self.low
        if value == value and low_ok and value <= self.high:  # NaN fails value == value
            return
        if self.wanted:
            wanted = self.wanted
        elif isinstance(value, int):
            low = f"> {_n(self.low)}" if self.low_open else f">= {_n(self.low)}"
            wanted = f"{low} and <= {_n(self.high)}"
        else:
            low = f"> {_n(self.low)}" if self.low_open else f">= {_n(self.low)}"
            wanted = f"a finite number {low} and <= {_n(self.high)}"
        raise InputError(f"must be {wanted}", field=flag, value=value)


def _n(x: float) -> str:
    """A bound as typed: 10, 2592000, 0.5 (not 2.592e+06)."""
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


_SEED = Bound(0, 2**32 - 1)
_PORT = Bound(0, 65_535)
_SECONDS = Bound(0, 30 * 86_400, low_open=True)  # a duration: up to 30 days
_SECONDS_OR_ZERO = Bound(0, 30 * 86_400)
_GPU_INDEX = Bound(0, 1_023)
_RATE = Bound(0, 1e6, low_open=True)

# By the parameter's name (the flag without dashes, with underscores), the same bound in
# every command that has it.
BOUNDS: dict[str, Bound] = {
    "seed": _SEED,
    "gpus_per_node": Bound(1, 1_024),
    "round_s": _SECONDS,
    "resolve_interval_s": _SECONDS_OR_ZERO,
    "inflate": Bound(0, 10.0, low_open=True),
    "workers": Bound(0, 1_024, wanted="1..1024, or 0 for one per core"),
    "ray_timeout_s": Bound(0, 3_600, low_open=True),
    "port": _PORT,
    "metrics_port": _PORT,
    "grace_s": Bound(0, 3_600),
    "grace": Bound(0, 3_600),
    "max_retries": Bound(0, 1_000),
    "start_timeout_s": Bound(0, 3_600, low_open=True),
    "time_scale": Bound(0, 1e6, low_open=True),
    "steps": Bound(0, 1e15, low_open=True),
    "wall_budget_s": _SECONDS,
    "gpus": Bound(1, 100_000),
    "gpu_milli": Bound(1, 1_000),
    "priority_weight": Bound(0, 1e6, low_open=True),
    "job_id": Bound(1, 2**63 - 1),
    "job": Bound(0, 2**63 - 1),
    "tail": Bound(0, 2**31 - 1),
    "link_gb_s": _RATE,
    "fault_gb_s": _RATE,
    "sweep_s": _SECONDS,
    "prefetch_threshold": Bound(0, 1),
    "handover_s": _SECONDS_OR_ZERO,
    "gpu_busy": Bound(0, 1, low_open=True),
    "restart_at": Bound(0, 2**31 - 1),
    "tq": _SECONDS,
    "memory_mib": Bound(0, 1e8, low_open=True),
    "gpu": _GPU_INDEX,
    "slots": Bound(1, 1_000),
    "window": Bound(1, 10_000_000),  # the extender's learned workload, in pods
    "refresh": Bound(1, 10_000_000),
    "token_fd": Bound(0, 2**20),  # serve's token handed to its re-executed self on a pipe
    "service_uid": Bound(0, 2**32 - 2),  # a Linux uid (2**32 - 1 is "no user")
}


def check_bounds(values: dict[str, object]) -> None:
    """Refuse the first numeric option outside its bound (``None``: not given)."""
    for name, value in values.items():
        bound = BOUNDS.get(name)
        if bound is None or isinstance(value, bool) or not isinstance(value, int | float):
            continue
        bound.check(value, "--" + name.replace("_", "-"))


def check_count(count: int, limit: int, what: str, flag: str) -> None:
    """A count that a text value expands to (seeds, runs, rates), at most ``limit``."""
    if count > limit:
        raise InputError(f"{count:,} {what}: at most {limit:,}", field=flag)
