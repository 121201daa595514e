"""The one road from a description to objects, and where a run is run.

``build_parts(description) -> RunParts``: parse the cluster and the workload, make the
run's root ``numpy.random.Generator`` from ``--seed``, build the policy (a queue order or
a Gavel allocation policy, by the mechanism's policy kind; a policy that draws at random
gets the Generator), the placement strategy against the mechanism's target workload, and
the mechanism's sharing object. ``run(description)`` hands those objects to the
mechanism (``run/mechanisms``) and summarizes the result. Simulators never see a string.

``build_live_parts(description, cluster, target_jobs)``: the same objects for a live
service (``serve``), whose mechanism's plug-in builds its decider from them. This
package sits below ``experiments/`` in the import layers (pyproject.toml), so every
caller can.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np

from gpumosaic.mechanisms.contract import (
    NO_HOOKS,
    LiveParts,
    Mechanism,
    ProgressCallback,
    SimHooks,
)
from gpumosaic.model.cluster import ClusterSpec
from gpumosaic.model.job import JobSpec
from gpumosaic.placement.base import PlacementStrategy
from gpumosaic.placement.workload import TargetWorkload
from gpumosaic.policies.base import Policy
from gpumosaic.policies.ordering import QueueOrder, build_queue_order
from gpumosaic.run.description import RunDescription
from gpumosaic.run.parts import build_allocation_policy, build_placement_for
from gpumosaic.run.registry import PolicyKind, RunParts, get_mechanism
from gpumosaic.workloads.spec import ParsedWorkload, parse_cluster, parse_workload
from gpumosaic.workloads.workload import Workload

if TYPE_CHECKING:
    from gpumosaic.results.run_outcome import RunOutcome


def build_parts(
    description: RunDescription,
    *,
    cluster: ClusterSpec | None = None,
    workload: Workload | None = None,
    policy: Policy | QueueOrder | None = None,
    window_s: tuple[float, float] | None = None,
) -> RunParts:
    """Every object of one run, built once from its validated description.

    A study may hand over what a description cannot name: a ``cluster`` or ``workload``
    object it built itself (Gavel's reproductions: a trace, Gavel's own job stream), or a
    ``policy`` object outside the registry (Gavel's policies as shipped,
    ``reproductions/gavel_quirks.py``); it replaces the named one and everything else is
    built as for ``simulate`` (the Generator from ``--seed``, the target workload, the
    placement, the sharing object). ``window_s`` is a measurement window for the
    mechanisms that take one (Gandiva's reproduction: GPU-seconds while the cluster is
    loaded)."""
    mechanism = get_mechanism(description.resolved_mechanism())
    if cluster is None:
        cluster = parse_cluster(description.cluster, description.gpus_per_node)
    parsed = (
        parse_workload(description.workload, description.seed)
        if workload is None
        else ParsedWorkload(workload)
    )
    rng = np.random.default_rng(description.seed)
    target = mechanism.target(parsed.workload)
    policy, placement = _decisions(description, mechanism, rng, target, policy)
    return RunParts(
        description=description,
        cluster=cluster,
        parsed=parsed,
        target=target,
        policy=policy,
        placement=placement,
        sharing=mechanism.sharing(description),
        rng=rng,
        window_s=window_s,
    )


def build_live_parts(
    description: RunDescription, cluster: ClusterSpec, target_jobs: Sequence[JobSpec]
) -> LiveParts:
    """A live service's decision objects (``serve``), on the road ``build_parts`` takes:
    the seed's Generator, the policy by the mechanism's policy kind, the placement against
    the mechanism's target of ``target_jobs`` (None: its own order), its sharing object
    (Gandiva's options). The mechanism's ``live_decider`` builds its decider from them."""
    mechanism = get_mechanism(description.resolved_mechanism())
    rng = np.random.default_rng(description.seed)
    target = mechanism.target_of(target_jobs)
    policy, placement = _decisions(description, mechanism, rng, target, None)
    return LiveParts(
        description=description,
        cluster=cluster,
        target=target,
        policy=policy,
        placement=placement,
        sharing=mechanism.sharing(description),
        rng=rng,
    )


def _decisions(
    description: RunDescription,
    mechanism: Mechanism,
    rng: np.random.Generator,
    target: TargetWorkload,
    policy: Policy | QueueOrder | None,
) -> tuple[Policy | QueueOrder, PlacementStrategy | None]:
    """The policy (a caller's object, or built by the mechanism's policy kind: a policy
    that draws at random draws from ``rng``) and the placement against ``target``."""
    # A caller's policy object draws from its own seeded Generator, if at all.
    if policy is None and mechanism.policy_kind is PolicyKind.QUEUE_ORDER:
        policy = build_queue_order(description.policy)
    elif policy is None:
        policy = build_allocation_policy(description.policy, rng)
    name = description.resolved_placement()
    placement: PlacementStrategy | None = None  # None: the mechanism's own server order
    if name.strip().lower() != mechanism.own_placement:
        placement = build_placement_for(name, target)
    return policy, placement


def run(description: RunDescription, progress: ProgressCallback | None = None) -> RunOutcome:
    """Build and run ``description``: the result, its summary, and one line per job that
    can never fit (naming the file, row and field when the jobs came from a job list)."""
    return run_parts(build_parts(description), progress)


def run_parts(
    parts: RunParts, progress: ProgressCallback | None = None, hooks: SimHooks = NO_HOOKS
) -> RunOutcome:
    """Run built parts (``build_parts``) with their mechanism and summarize the result;
    ``hooks``: what the caller watches or sets (``SimHooks``: sim-vs-live's)."""
    # Imported here: building parts (and refusing a bad --cluster) needs none of them.
    from gpumosaic.results.run_outcome import RunOutcome, never_fit_lines
    from gpumosaic.results.summary import summarize
    from gpumosaic.workloads.load import offered_load

    mechanism = get_mechanism(parts.description.resolved_mechanism())
    result = mechanism.simulate(parts, progress, hooks)
    load = offered_load(parts.parsed.workload, parts.cluster)
    if load is not None and result.background is not None:  # it holds GPUs all along
        load = replace(load, background_gpus=result.background.fraction * load.cluster_gpus)
    return RunOutcome(
        result,
        summarize(result),
        never_fit_lines(result, parts.parsed, parts.cluster),
        load,
    )
