"""PowerTracker: the PWR power model, worked by hand, and kept current incrementally."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from gpumosaic.model import Assignment, ClusterSpec, ClusterState, NodeSpec, gpu_model
from gpumosaic.model.power import PowerTracker, cluster_power_w


def two_nodes() -> ClusterState:
    spec = ClusterSpec(
        (
            NodeSpec("a", gpu_model("V100"), 2, 8000, 1000),  # 4 cores: one socket
            NodeSpec("b", gpu_model("T4"), 1, 4000, 500),  # 2 cores: one socket
        )
    )
    return ClusterState(spec)


def test_power_by_hand() -> None:
    state = two_nodes()
    tracker = PowerTracker(state)
    # Idle: GPUs 2 x 30 W (V100) + 10 W (T4); CPU: two idle sockets at 15 W.
    assert tracker.power_w == (70.0, 30.0)
    state.allocate(Assignment(7, 0, (1,), 300, 2000, 100))
    # Any allocation puts a GPU at full power: 300 + 30 + 10; node a's socket is active.
    assert tracker.power_w == (340.0, 135.0)
    state.release(7)
    assert tracker.power_w == (70.0, 30.0)


@given(
    st.lists(
        st.tuples(st.integers(0, 1), st.integers(0, 1), st.integers(1, 1000), st.integers(0, 4000)),
        max_size=6,
    )
)
def test_incremental_equals_a_fresh_evaluation(requests) -> None:
    state = two_nodes()
    tracker = PowerTracker(state)
    for job_id, (node, gpu, milli, cpu) in enumerate(requests):
        if gpu >= state.num_gpus[node] or state.gpu_free[node, gpu] < milli:
            continue
        if state.cpu_free[node] < cpu:
            continue
        state.allocate(Assignment(job_id, node, (gpu,), milli, cpu, 0))
        assert tracker.power_w == cluster_power_w(state)
    fresh = PowerTracker(state)
    np.testing.assert_array_equal(tracker.node_gpu_w, fresh.node_gpu_w)
    np.testing.assert_array_equal(tracker.node_cpu_w, fresh.node_cpu_w)


def test_every_gpu_model_draws_whole_watts() -> None:
    # The tracker keeps its totals by difference; whole watts keep them exact.
    from gpumosaic.model.gpu import GPU_MODELS

    for model in GPU_MODELS.values():
        assert float(model.idle_w).is_integer() and float(model.full_w).is_integer()


@given(
    st.lists(
        st.tuples(
            st.booleans(),
            st.integers(0, 1),
            st.integers(0, 1),
            st.integers(1, 1000),
            st.integers(0, 4000),
        ),
        max_size=12,
    )
)
def test_touching_changed_nodes_equals_a_fresh_evaluation(steps) -> None:
    """``touch`` (one node, plain Python numbers) gives the same per-node watts and
    totals as ``update`` (numpy over all nodes), after allocations and releases."""
    state = two_nodes()
    tracker = PowerTracker(state)
    held: list[int] = []
    for job_id, (release, node, gpu, milli, cpu) in enumerate(steps):
        if release and held:
            node = state.release(held.pop(0)).node
        elif gpu < state.num_gpus[node] and state.gpu_free[node, gpu] >= milli:
            if state.cpu_free[node] < cpu:
                continue
            state.allocate(Assignment(job_id, node, (gpu,), milli, cpu, 0))
            held.append(job_id)
        tracker.touch(node)
        tracker.touch(node)  # a repeat changes nothing
        fresh = PowerTracker(state)
        assert tracker.totals == fresh.totals == cluster_power_w(state)
        np.testing.assert_array_equal(tracker.node_gpu_w, fresh.node_gpu_w)
        np.testing.assert_array_equal(tracker.node_cpu_w, fresh.node_cpu_w)
