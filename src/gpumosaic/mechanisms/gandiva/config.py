"""Gandiva's knobs: one frozen value, and the CLI spelling ``gandiva:packing=on,migration=off``.

Defaults and where they come from (docs/gandiva.md has the long version):

- ``quantum_s`` 60 s: Gandiva splits jobs into 60 s time slices when a GPU is oversubscribed.
- ``switch_s`` 1 s: a hand-over (suspend one job at a mini-batch boundary, copy its GPU
  memory out, copy the next one's in and resume it). The paper reports suspend/resume in
  well under a second for most models and about a second for large ones; we take the
  upper end so that time-slicing is not flattered.
- ``migration_cost_s`` 30 s: checkpoint, move and restart a job on another server. The
  paper reports migrations from about a second to a few tens of seconds, dominated by
  framework restart; 30 s is the pessimistic end.
- ``start_s`` 0 s: a job's first start, from the decision until it steps (launching its
  process). Gandiva's paper does not count it (a job's JCT starts with its launch) and
  neither does the simulator by default; live it is the launch latency of a process, and
  ``sim-vs-live --mechanism gandiva`` sets it (with ``switch_s`` and ``migration_cost_s``)
  to what the same live run measured (``mechanisms/gandiva/live/driver.py``, ``HandOverTimes``; the
  measured values are in docs/gandiva.md, "Simulator vs live").
- ``max_share`` 4: at most this many jobs resident on a GPU set (time-sliced or packed);
  beyond it a job waits in the queue. Gandiva bounds oversubscription by host memory
  for the suspended jobs' state; a fixed bound keeps runs comparable.
- ``profile_s`` 60 s: how long a new pair runs together before introspection decides.
- ``pack_margin`` 0: keep a pair if the sum of its normalized throughputs exceeds
  1 + margin (time-slicing gives the two jobs a sum of 1).
- ``pack_util_limit`` 1.0: a pair is tried only if the two jobs' profiled utilizations add
  up to at most this (they should fit in one GPU's compute); ``inf`` tries any pair.
- ``max_pack_tries`` 4: packing attempts per job, so that a job that packs badly with
  everyone does not spend its life in trials.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gpumosaic.options import INFINITY_ALLOWED, OptionError, parse_options


@dataclass(frozen=True, slots=True)
class GandivaConfig:
    packing: bool = True
    migration: bool = True
    time_slicing: bool = True
    quantum_s: float = 60.0
    switch_s: float = 1.0
    migration_cost_s: float = 30.0
    start_s: float = 0.0
    max_share: int = 4
    profile_s: float = 60.0
    pack_margin: float = 0.0
    pack_util_limit: float = field(default=1.0, metadata={INFINITY_ALLOWED: True})
    max_pack_tries: int = 4
    check_invariants: bool = False  # verify bookkeeping after every event (tests)

    def __post_init__(self) -> None:
        if self.quantum_s <= 0:
            raise GandivaOptionError("quantum_s must be > 0")
        if self.switch_s < 0 or self.migration_cost_s < 0 or self.start_s < 0:
            raise GandivaOptionError("switch_s, migration_cost_s and start_s must be >= 0")
        if self.switch_s >= self.quantum_s:
            raise GandivaOptionError("switch_s must be shorter than quantum_s")
        if self.max_share < 1:
            raise GandivaOptionError("max_share must be >= 1")
        if self.profile_s <= 0:
            raise GandivaOptionError("profile_s must be > 0")
        if self.pack_util_limit <= 0:
            raise GandivaOptionError("pack_util_limit must be > 0")
        if self.max_pack_tries < 0:
            raise GandivaOptionError("max_pack_tries must be >= 0")


class GandivaOptionError(OptionError):
    """A bad ``--sharing gandiva:...`` option; the message names the key."""


# CLI key -> config field. Short keys are what users type; the field names work too.
_ALIASES: dict[str, str] = {
    "packing": "packing",
    "pack": "packing",
    "migration": "migration",
    "migrate": "migration",
    "time_slicing": "time_slicing",
    "timeslicing": "time_slicing",
    "ts": "time_slicing",
    "quantum": "quantum_s",
    "switch": "switch_s",
    "migration_cost": "migration_cost_s",
    "start": "start_s",
    "max_share": "max_share",
    "profile": "profile_s",
    "margin": "pack_margin",
    "pack_margin": "pack_margin",
    "pack_tries": "max_pack_tries",
    "util_limit": "pack_util_limit",
    "check": "check_invariants",
}


def parse_gandiva_options(spec: str, base: GandivaConfig | None = None) -> GandivaConfig:
    """``"gandiva:packing=on,migration=off,quantum=30"`` -> GandivaConfig.

    The ``gandiva:`` prefix is optional; ``gandiva`` alone gives the defaults. Keys:
    packing, migration, time_slicing (or ts) take on/off (or true/false, yes/no, 1/0,
    as every on/off option: ``gpumosaic.options``); quantum, switch,
    migration_cost, start, profile (seconds), margin, util_limit, max_share and pack_tries take
    numbers.
    Every config field name is accepted as a key too.
    """
    text = spec.strip()
    name, sep, rest = text.partition(":")
    if name.strip().lower() != "gandiva":
        if sep:
            raise GandivaOptionError(f"sharing model {name!r} is not gandiva")
        rest = text  # no prefix: the whole text is the option list
    return parse_options(
        GandivaConfig,
        rest,
        what="gandiva option",
        aliases=_ALIASES,
        base=base,
        error=GandivaOptionError,
    )
