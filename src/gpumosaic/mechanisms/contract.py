"""The ``Mechanism`` plug-in contract and what the build module hands a mechanism.

A mechanism says *when* jobs run. As a plug-in it is one small object with:

- ``name``: its ``--mechanism`` spelling;
- ``policy_kind``: which registry ``--policy`` names come from (queue orders or Gavel
  allocation policies); ``auto`` picks the first mechanism whose kind knows the name;
- ``default_placement``: the placement when ``--placement`` is not given;
- ``default_policy``: the policy ``serve`` runs when ``--policy`` is not given;
- ``own_placement``: a ``--placement`` name that means the mechanism's own server order
  rather than a registry strategy (Gandiva's ``affinity``), or None;
- ``check(description)``: reject what it cannot run, as an ``InputError`` naming the
  option (called when a ``RunDescription`` is validated);
- ``target(workload)``: the target workload its placement scores against (FGD), from
  ``target_of(jobs)`` (a live service's: from ``--target-workload``'s jobs);
- ``sharing(description)``: its sharing object, built from ``--sharing``;
- ``simulate(parts, progress, hooks)``: drive its decisions with a simulated clock over
  the built objects (``RunParts``) and return a ``SimResult``; ``hooks`` (``SimHooks``)
  are what a caller watches or sets beside the description (each round's plan, each
  decider step, a launch latency: sim-vs-live's), and a mechanism refuses one it has no
  use for (nothing given is dropped);
- ``live_decider(parts)`` (a mechanism with a live driver only: ``ServedMechanism``):
  its clock-free decider over the same objects (``LiveParts``), which its live driver
  (``mechanisms/<m>/live``) drives; ``serve`` refuses a mechanism without one.

Adding one: a file with such a class, and one line in ``run/registry.py``
(or ``register_mechanism(obj)`` at run time). A plug-in imports its simulator (and what
else is heavy) inside the method that needs it: the registry is imported to validate
every description, and a user mistake's one line should not pay for a simulator.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Any, Protocol

from gpumosaic.errors import InputError

if TYPE_CHECKING:
    # Types only: validating a description (a user mistake's one line) imports the
    # registry, and none of these (numpy, the simulators) is needed for that.
    import numpy as np

    from gpumosaic.model.cluster import ClusterSpec
    from gpumosaic.model.job import JobSpec
    from gpumosaic.placement.base import PlacementStrategy
    from gpumosaic.placement.workload import TargetWorkload
    from gpumosaic.policies.base import Policy
    from gpumosaic.policies.ordering import QueueOrder
    from gpumosaic.results.result import SimResult
    from gpumosaic.run.description import RunDescription
    from gpumosaic.workloads.spec import ParsedWorkload
    from gpumosaic.workloads.workload import Workload

ProgressCallback = Callable[[float], None]


class PolicyKind(Enum):
    QUEUE_ORDER = "queue order"  # fifo, sjf, priority: the order of a pending queue
    ALLOCATION = "allocation policy"  # Gavel's policies: X (jobs x GPU types)


@dataclass(frozen=True, slots=True)
class RunParts:
    """The objects of one run, built once from its description (``run.build``)."""

    description: RunDescription
    cluster: ClusterSpec
    parsed: ParsedWorkload
    target: TargetWorkload
    policy: Policy | QueueOrder
    placement: PlacementStrategy | None  # None: the mechanism's own order (Gandiva's)
    sharing: object  # what the mechanism's ``sharing()`` built (a SpeedModel, a config)
    rng: np.random.Generator  # the run's root Generator, seeded from --seed
    # A study's measurement window [start, end) in simulated seconds (Gandiva's utilization
    # over the loaded part of a run); None: none. No description names one.
    window_s: tuple[float, float] | None = None

    @property
    def workload(self) -> Workload:
        return self.parsed.workload


@dataclass(frozen=True, slots=True)
class LiveParts:
    """The decision objects of one live service, built once from its description
    (``run.build.build_live_parts``): as ``RunParts``, less the workload (jobs come
    through the API) and on the cluster read off Ray."""

    description: RunDescription
    cluster: ClusterSpec
    target: TargetWorkload
    policy: Policy | QueueOrder
    placement: PlacementStrategy | None  # None: the mechanism's own order (Gandiva's)
    sharing: object
    rng: np.random.Generator  # the run's root Generator, seeded from --seed


@dataclass(frozen=True, slots=True)
class SimHooks:
    """What a caller watches or sets in a simulation beside its description."""

    on_plan: Callable[[Any], None] | None = None  # every round's plan (the rounds)
    on_step: Callable[[float, Any], None] | None = None  # every decider step (Gandiva)
    # A new lease's launch latency in simulated seconds, lost from its round (the rounds;
    # sim-vs-live gives the one its live run measured).
    launch_latency_s: float = 0.0

    def refuse_all_but(self, mechanism: str, *allowed: str) -> None:
        """A hook the mechanism has no use for is a caller's bug, not silently dropped."""
        given = {
            "on_plan": self.on_plan is not None,
            "on_step": self.on_step is not None,
            "launch_latency_s": self.launch_latency_s != 0.0,
        }
        unused = [name for name, set_ in given.items() if set_ and name not in allowed]
        if unused:
            raise ValueError(f"the {mechanism} mechanism has no {', '.join(unused)} hook")


NO_HOOKS = SimHooks()


class Mechanism(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def policy_kind(self) -> PolicyKind: ...

    @property
    def default_placement(self) -> str: ...

    @property
    def own_placement(self) -> str | None: ...

    @property
    def default_policy(self) -> str: ...

    # Whether --estimate-throughputs reaches the mechanism's decider (a mechanism that
    # does not say so does not: ``RunDescription`` refuses the flag there).
    estimates_throughputs: bool

    def check(self, description: RunDescription) -> None: ...

    def target(self, workload: Workload) -> TargetWorkload: ...

    def target_of(self, jobs: Sequence[JobSpec]) -> TargetWorkload: ...

    def sharing(self, description: RunDescription) -> object: ...

    def simulate(
        self, parts: RunParts, progress: ProgressCallback | None, hooks: SimHooks = NO_HOOKS
    ) -> SimResult: ...


class ServedMechanism(Mechanism, Protocol):
    """A mechanism ``serve`` runs: it also builds its decider for a live driver."""

    def live_decider(self, parts: LiveParts) -> object: ...


def refuse_background(description: RunDescription, mechanism: str) -> None:
    """Background load is pre-filled state of the event mechanism; elsewhere it would be
    silently ignored, so it is an error."""
    if description.background is not None:
        raise InputError(
            f"background load needs the event mechanism (a queue order such as fifo); "
            f"the {mechanism} mechanism would ignore it",
            field="--background",
            value=description.background,
        )


def check_placement(placement: str | None, own_order: str | None = None) -> None:
    """Fail early (``--placement``) on a placement name no strategy has; ``own_order`` is
    a mechanism's own server order (Gandiva's ``affinity``), allowed only there. The
    placement grammar's own check: no scorer, no numpy."""
    if placement is None:
        return
    from gpumosaic.placement.registry import check_placement_for

    name = placement.strip().lower()
    if own_order is not None and name == own_order:
        return
    if name == "affinity":
        raise InputError(
            "affinity is Gandiva's own server order: only with --mechanism gandiva",
            field="--placement",
        )
    check_placement_for(placement)
