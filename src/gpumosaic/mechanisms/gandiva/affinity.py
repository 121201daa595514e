"""Gandiva's affinity-based placement, as a pure function over a snapshot of servers.

A server's *affinity* is the GPU count of the jobs placed on it (0 while it is empty).
Gandiva keeps jobs of one size together so that large jobs find whole servers and
same-size jobs can time-share a GPU set. A k-GPU job goes, in this order, to

1. a server of affinity k with k free GPUs, least loaded first;
2. an unassigned (empty) server with at least k GPUs;
3. a server of another affinity with k free GPUs, least loaded first;
4. oversubscription: the least-shared k-GPU set on a server of affinity k, least loaded
   server first (only with time-slicing, and below ``max_share`` resident jobs per set).

"Least loaded first" is Gandiva's own order within a tier. A caller may replace it with a
``rank``: given a tier's candidate servers it returns one score per server (higher wins),
e.g. a placement strategy's scores (``ranking``). The tiers themselves never
change, and oversubscription (4) keeps its least-loaded, least-shared order: a placement
strategy scores servers that can hold the job, and a full server cannot.

Ties keep the order of the ``servers`` sequence (the decider passes its servers in a
seeded random order, as the reference simulators break node ties).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum

UNASSIGNED = 0


class ChoiceKind(StrEnum):
    SAME_AFFINITY = "same_affinity"
    UNASSIGNED = "unassigned"
    OTHER_AFFINITY = "other_affinity"
    OVERSUBSCRIBE = "oversubscribe"


@dataclass(frozen=True, slots=True)
class ServerView:
    """What placement needs to know of one server for a k-GPU job.

    ``load`` is jobs resident per GPU (time-sliced and packed jobs included);
    ``share_group``/``share_jobs`` name the least-shared set of exactly k GPUs on the
    server and how many jobs it holds (-1/0 when there is none).
    """

    node: int
    affinity: int
    num_gpus: int
    free_gpus: int
    load: float
    share_group: int = -1
    share_jobs: int = 0


# Scores of a tier's candidate servers, in their order; higher is better.
Rank = Callable[[Sequence["ServerView"]], Sequence[float]]


@dataclass(frozen=True, slots=True)
class Choice:
    kind: ChoiceKind
    node: int
    group: int = -1  # the GPU set to join when oversubscribing


def choose_server(
    servers: Sequence[ServerView],
    k: int,
    *,
    oversubscribe: bool,
    max_share: int,
    rank: Rank | None = None,
) -> Choice | None:
    """Where a k-GPU job goes by Gandiva's affinity order, or None when nowhere.

    Within tiers 1-3 the server is the least loaded one, or with ``rank`` the best ranked.
    """
    same = [s for s in servers if s.affinity == k and s.free_gpus >= k]
    if same:
        return Choice(ChoiceKind.SAME_AFFINITY, _best(same, rank).node)
    # Empty servers all have load 0: without a rank the first in the given order wins.
    empty = [
        s
        for s in servers
        if s.affinity == UNASSIGNED and s.num_gpus >= k and s.free_gpus == s.num_gpus
    ]
    if empty:
        return Choice(ChoiceKind.UNASSIGNED, _best(empty, rank).node)
    other = [s for s in servers if s.affinity not in (k, UNASSIGNED) and s.free_gpus >= k]
    if other:
        return Choice(ChoiceKind.OTHER_AFFINITY, _best(other, rank).node)
    if oversubscribe:
        shared = [
            s
            for s in servers
            if s.affinity == k and s.share_group >= 0 and s.share_jobs < max_share
        ]
        if shared:
            best = min(shared, key=lambda s: (s.load, s.share_jobs))
            return Choice(ChoiceKind.OVERSUBSCRIBE, best.node, best.share_group)
    return None


def _best(servers: list[ServerView], rank: Rank | None) -> ServerView:
    # min() and max() keep the first of equal keys, so ties follow the given server order.
    if rank is None:
        return min(servers, key=lambda s: s.load)
    scores = rank(servers)
    return servers[max(range(len(servers)), key=scores.__getitem__)]
