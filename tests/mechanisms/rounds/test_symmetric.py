"""The symmetric shortcut's compiled step against placing entity by entity: each takes the
lowest-index nodes of its type whose GPU is untouched and whose CPU and memory fit."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpumosaic.mechanisms.rounds.symmetric import SymmetricTypes
from gpumosaic.model import Assignment, ClusterSpec, ClusterState, NodeSpec, gpu_model


def one_gpu_servers() -> ClusterState:
    nodes = [NodeSpec(f"v{i}", gpu_model("V100"), 1, 4000, 1000) for i in range(7)]
    nodes += [NodeSpec(f"k{i}", gpu_model("K80"), 1, 4000, 1000) for i in range(5)]
    nodes += [NodeSpec("wide", gpu_model("P100"), 2, 4000, 1000)]  # not symmetric
    return ClusterState(ClusterSpec(tuple(nodes)))


def one_by_one(state: ClusterState, entities: list[tuple[int, int, int, int, int, bool]]):
    placed = []
    for holder, t, k, cpu, memory, eligible in entities:
        nodes = np.flatnonzero(state.node_model == t)
        free = [
            int(v)
            for v in nodes
            if state.gpu_free[v, 0] == 1000
            and state.cpu_free[v] >= cpu
            and state.memory_free[v] >= memory
        ]
        if not eligible or len(free) < k:
            placed.append(False)
            continue
        parts = tuple(Assignment(holder, v, (0,), 1000, cpu, memory) for v in free[:k])
        if k == 1:
            state.allocate(parts[0])
        else:
            state.allocate_gang(parts)
        placed.append(True)
    return placed


def snapshot(state: ClusterState) -> tuple[object, ...]:
    return (
        state.gpu_free.tolist(),
        state.gpu_tasks.tolist(),
        state.cpu_free.tolist(),
        state.kind_count.tolist(),
        state.node_version.tolist(),
        state.allocated_gpu_milli,
        sorted((h, state.parts_of(h)) for h in state.holder_ids()),
    )


@settings(max_examples=80, deadline=None)
@given(
    st.lists(st.integers(0, 11), max_size=6, unique=True),
    st.lists(
        st.tuples(
            st.sampled_from([0, 1]),  # type: V100, K80 (by model index)
            st.integers(1, 4),
            st.sampled_from([0, 1000, 5000]),
            st.sampled_from([0, 500]),
            st.booleans(),
        ),
        max_size=12,
    ),
)
@pytest.mark.slow  # the compiled step against a one-by-one reference, many cases: seconds of CPU
def test_compiled_step_places_as_one_by_one(busy: list[int], wishes: list[tuple]) -> None:
    states = [one_gpu_servers(), one_gpu_servers()]
    for state in states:  # some GPUs already shared by fractional holders
        for i, node in enumerate(busy):
            state.allocate(Assignment(1000 + i, node, (0,), 300, 100, 10))
    order = {name: i for i, name in enumerate(states[0].model_names)}
    entities = [
        (h, order[("V100", "K80")[t]], k, cpu, memory, k == 1 or span)
        for h, (t, k, cpu, memory, span) in enumerate(wishes)
    ]
    expected = one_by_one(states[0], entities)
    symmetric = SymmetricTypes(states[1], len(order), enabled=True)
    assert symmetric.mask.tolist() == [name != "P100" for name in states[1].model_names]
    got = symmetric.place(
        states[1],
        np.array([e[1] for e in entities], dtype=np.int64),
        [e[0] for e in entities],
        np.array([e[2] for e in entities], dtype=np.int64),
        np.array([e[3] for e in entities], dtype=np.int64),
        np.array([e[4] for e in entities], dtype=np.int64),
        np.array([e[5] for e in entities], dtype=bool),
    )
    assert got.tolist() == expected
    assert snapshot(states[1]) == snapshot(states[0])
    states[1].check_invariants()
