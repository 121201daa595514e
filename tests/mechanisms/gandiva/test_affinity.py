"""Gandiva's affinity order on a table of server states."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from gpumosaic.mechanisms.gandiva.affinity import Choice, ChoiceKind, ServerView, choose_server

S = ServerView
SAME, EMPTY, OTHER, OVER = (
    ChoiceKind.SAME_AFFINITY,
    ChoiceKind.UNASSIGNED,
    ChoiceKind.OTHER_AFFINITY,
    ChoiceKind.OVERSUBSCRIBE,
)

# Each row: (k, servers, oversubscribe, expected choice). ServerView fields: node,
# affinity (0 = empty), num_gpus, free_gpus, load (jobs per GPU), least-shared k-GPU set, its jobs.
ROWS = [
    # Same affinity beats an empty server, and the less loaded of two same-affinity servers
    # wins: node 1 (load 0.25) over node 0 (0.75). Node 2 stays empty for bigger jobs.
    (1, [S(0, 1, 4, 1, 0.75), S(1, 1, 4, 3, 0.25), S(2, 0, 4, 4, 0.0)], True, Choice(SAME, 1)),
    # No affinity-2 server: the empty server 1 comes before the affinity-1 server 0 that
    # has 3 free GPUs (a wrong-affinity server is only the third choice).
    (2, [S(0, 1, 4, 3, 0.25), S(1, 0, 4, 4, 0.0)], True, Choice(EMPTY, 1)),
    # No same affinity with 2 free, no empty server: other affinity, the less loaded one
    # (node 2, load 0.25) -- node 1 has affinity 2 but only one free GPU.
    (
        2,
        [S(0, 1, 4, 2, 0.5), S(1, 2, 4, 1, 0.5), S(2, 4, 8, 6, 0.25)],
        True,
        Choice(OTHER, 2),
    ),
    # Everything full: oversubscribe a 2-GPU set on an affinity-2 server, least loaded server
    # first (node 1, load 0.75; both sets hold 2 jobs). Node 2 has affinity 1.
    (
        2,
        [S(0, 2, 4, 0, 1.0, 7, 2), S(1, 2, 4, 0, 0.75, 9, 2), S(2, 1, 4, 1, 1.0, 3, 1)],
        True,
        Choice(OVER, 1, 9),
    ),
    # Oversubscription never goes to another affinity: node 1's 1-GPU set is not for k=2.
    (2, [S(0, 2, 4, 0, 1.0, 7, 4), S(1, 1, 4, 0, 1.0, 3, 1)], True, None),
    # Every same-affinity set is at max_share (4 resident jobs): nowhere, the job queues.
    (1, [S(0, 1, 4, 0, 4.0, 2, 4), S(1, 1, 4, 0, 4.0, 5, 4)], True, None),
    # Without time-slicing a full cluster has no place even with shareable sets.
    (1, [S(0, 1, 4, 0, 1.0, 2, 1)], False, None),
    # Ties keep the given (seeded) server order: node 3 is listed first.
    (1, [S(3, 1, 4, 2, 0.5), S(0, 1, 4, 2, 0.5)], True, Choice(SAME, 3)),
    # An empty server too small for the job is skipped: the 4-GPU one takes it.
    (4, [S(0, 0, 2, 2, 0.0), S(1, 0, 4, 4, 0.0)], True, Choice(EMPTY, 1)),
    # A same-affinity server with free GPUs wins even if it is more loaded than an
    # other-affinity server.
    (1, [S(0, 2, 4, 2, 0.1), S(1, 1, 4, 1, 0.9)], True, Choice(SAME, 1)),
]


@pytest.mark.parametrize(("k", "servers", "oversubscribe", "expected"), ROWS)
def test_affinity_order(
    k: int, servers: list[ServerView], oversubscribe: bool, expected: Choice | None
) -> None:
    assert choose_server(servers, k, oversubscribe=oversubscribe, max_share=4) == expected


def prefer_last(servers: Sequence[ServerView]) -> list[float]:
    # A rank that scores servers by their position: the last listed wins within a tier.
    return [float(i) for i in range(len(servers))]


@pytest.mark.parametrize(("k", "servers", "oversubscribe", "expected"), ROWS)
def test_a_rank_changes_the_server_within_a_tier_only(
    k: int, servers: list[ServerView], oversubscribe: bool, expected: Choice | None
) -> None:
    ranked = choose_server(servers, k, oversubscribe=oversubscribe, max_share=4, rank=prefer_last)
    if expected is None or expected.kind is OVER:
        # Nowhere stays nowhere; oversubscription keeps least loaded, least shared.
        assert ranked == expected
        return
    assert ranked is not None and ranked.kind is expected.kind
    tier = [s for s in servers if _in_tier(s, k, expected.kind)]
    assert ranked.node == tier[-1].node


def _in_tier(s: ServerView, k: int, kind: ChoiceKind) -> bool:
    if kind is SAME:
        return s.affinity == k and s.free_gpus >= k
    if kind is EMPTY:
        return s.affinity == 0 and s.num_gpus >= k and s.free_gpus == s.num_gpus
    return s.affinity not in (k, 0) and s.free_gpus >= k
