"""The state owner: concurrent binds never over-commit, a restart rebuilds from the
recorded annotations, the learned target workload, releases."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
from extender_builders import args, binding, cluster, service, v1_pod
from hypothesis import given, settings
from hypothesis import strategies as st

from gpumosaic.apps.extender.service import ExtenderService
from gpumosaic.apps.extender.sqlite_store import SqliteBackend
from gpumosaic.apps.extender.target import TargetSource
from gpumosaic.apps.extender.wire import ExtenderArgs, ExtenderBindingArgs


def _filter(svc, pod, names):
    return svc.filter(ExtenderArgs.model_validate(args(pod, names)))


def _prioritize(svc, pod, names):
    return svc.prioritize(ExtenderArgs.model_validate(args(pod, names)))


def _bind(svc, pod, node):
    return svc.bind(ExtenderBindingArgs.model_validate(binding(pod, node)))


def test_three_12gib_pods_cannot_share_one_24gib_gpu(tmp_path: Path) -> None:
    """Volcano #3616: a bind race put 3 x 12 GiB on one 24 GiB card. Here all three were
    scored against the empty GPU, then bound at once: exactly two fit."""
    svc = service(cluster(("A10", 1)), tmp_path / "s.db")
    pods = [v1_pod(milli=500) for _ in range(3)]
    for pod in pods:
        _filter(svc, pod, ["n0"])
        assert max(s["Score"] for s in _prioritize(svc, pod, ["n0"])) == 10
    barrier = threading.Barrier(3)

    def go(pod):
        barrier.wait()
        return _bind(svc, pod, "n0")["Error"]

    with ThreadPoolExecutor(3) as pool:
        errors = list(pool.map(go, pods))
    assert sorted(bool(e) for e in errors) == [False, False, True]
    assert "has no room" in next(e for e in errors if e)
    svc.check_invariants()
    assert int(svc.nodes.state.gpu_free[0, 0]) == 0


@settings(max_examples=25)
@given(
    gpus=st.integers(1, 4),
    shares=st.lists(st.sampled_from([100, 250, 300, 500, 700, 1000]), min_size=2, max_size=12),
)
def test_concurrent_binds_to_one_node_never_over_commit(tmp_path_factory, gpus, shares) -> None:
    svc = service(cluster(("V100", gpus)), tmp_path_factory.mktemp("c") / "s.db")
    pods = [v1_pod(milli=m) for m in shares]
    for pod in pods:
        _filter(svc, pod, ["n0"])
        _prioritize(svc, pod, ["n0"])  # every decision made against the empty node
    with ThreadPoolExecutor(8) as pool:
        errors = list(pool.map(lambda p: _bind(svc, p, "n0")["Error"], pods))
    svc.check_invariants()
    held = svc.held()
    used = np.zeros(gpus, dtype=int)
    for _, a, _ in held:
        for g in a.gpus:
            used[g] += a.gpu_milli
    assert (used <= 1000).all()
    assert len(held) == sum(not e for e in errors)
    # a failed bind really had no room: the smallest rejected share does not fit anywhere
    rejected = [m for m, e in zip(shares, errors, strict=True) if e]
    if rejected:
        assert (1000 - used < min(rejected)).all()


def test_restart_rebuilds_from_the_recorded_annotations(tmp_path: Path) -> None:
    spec = cluster(("V100", 2), ("T4", 4))
    svc = service(spec, tmp_path / "s.db")
    for milli, node in ((300, "n0"), (700, "n0"), (1000, "n1")):
        pod = v1_pod(milli=milli)
        _filter(svc, pod, ["n0", "n1"])
        assert _bind(svc, pod, node)["Error"] == ""
    before = svc.nodes.state.gpu_free.copy()
    svc.backend.close()  # type: ignore[attr-defined]
    again = service(spec, tmp_path / "s.db")
    assert np.array_equal(again.nodes.state.gpu_free, before)
    assert len(again.held()) == 3
    again.check_invariants()


def test_restart_keeps_the_random_stream(tmp_path: Path) -> None:
    """The generator's state is saved with each bind: a restarted extender continues the
    stream instead of starting it over (same decisions as without the restart)."""
    spec = cluster(*[("V100", 1)] * 6)
    names = [f"n{i}" for i in range(6)]

    def run(restart: bool, db: Path) -> list[str]:
        svc = service(spec, db, placement="random", seed=7)
        chosen = []
        for i in range(4):
            if restart and i == 2:
                svc.backend.close()  # type: ignore[attr-defined]
                svc = service(spec, db, placement="random", seed=999)  # seed ignored now
            pod = v1_pod(milli=400)
            _filter(svc, pod, names)
            scores = _prioritize(svc, pod, names)
            node = max(scores, key=lambda s: s["Score"])["Host"]
            assert _bind(svc, pod, node)["Error"] == ""
            chosen.append(node)
        return chosen

    assert run(False, tmp_path / "a.db") == run(True, tmp_path / "b.db")


def test_release_frees_the_share_and_survives_restart(tmp_path: Path) -> None:
    spec = cluster(("V100", 1))
    svc = service(spec, tmp_path / "s.db")
    pod = v1_pod(milli=600, name="job-a")
    _filter(svc, pod, ["n0"])
    assert _bind(svc, pod, "n0")["Error"] == ""
    assert svc.release_by_name("team-a", "job-a")
    assert not svc.release_by_name("team-a", "job-a")
    svc.backend.close()  # type: ignore[attr-defined]
    again = service(spec, tmp_path / "s.db")
    assert again.held() == [] and int(again.nodes.state.gpu_free[0, 0]) == 1000


def test_the_learned_target_workload_follows_the_pods(tmp_path: Path) -> None:
    backend = SqliteBackend(cluster(("V100", 2)), tmp_path / "s.db", "c")
    target = TargetSource(None, size=4, refresh_every=2)
    svc = ExtenderService(backend, "fgd", target)
    assert target.workload is None
    for milli in (500, 500, 250, 250, 250, 250, 250):  # rebuilt after pods 1, 3, 5, 7
        _filter(svc, v1_pod(milli=milli), ["n0"])
    assert target.window_len == 4  # the window slid past the two 500s
    assert target.workload is not None
    assert [c.gpu_milli for c in target.workload.classes] == [250]


def test_a_bind_without_prioritize_decides_like_fill(tmp_path: Path) -> None:
    """kube-scheduler skips prioritize when one node passes: bind decides the GPU."""
    svc = service(cluster(("V100", 4)), tmp_path / "s.db", placement="bestfit")
    first, second = v1_pod(milli=300), v1_pod(milli=600)
    for pod in (first, second):
        _filter(svc, pod, ["n0"])
        assert _bind(svc, pod, "n0")["Error"] == ""
    gpus = {r.name: a.gpus for r, a, _ in svc.held()}
    assert gpus[first["metadata"]["name"]] == gpus[second["metadata"]["name"]] == (0,)


def test_target_workload_specs(tmp_path: Path) -> None:
    import pytest

    from gpumosaic.apps.extender.target import load_target_jobs
    from gpumosaic.errors import InputError

    assert len(load_target_jobs("openb:default")) > 8000
    jobs = tmp_path / "jobs.csv"
    jobs.write_text("arrival_s,num_gpu,gpu_milli,duration_s\n0,1,500,60\n5,2,1000,60\n")
    assert [(j.num_gpu, j.gpu_milli) for j in load_target_jobs(str(jobs))] == [(1, 500), (2, 1000)]
    with pytest.raises(InputError, match="unknown target workload"):
        load_target_jobs("gavel:jobs=5")


def test_when_kube_scheduler_filtered_out_the_strategys_node_the_next_best_wins(
    tmp_path: Path,
) -> None:
    svc = service(cluster(("V100", 1), ("V100", 1), ("V100", 1)), tmp_path / "s.db")
    pod = v1_pod(milli=500)
    names = ["n0", "n1", "n2"]
    _filter(svc, pod, names)
    full = {s["Host"]: s["Score"] for s in _prioritize(svc, pod, names)}
    choice = max(full, key=full.__getitem__)
    rest = [n for n in names if n != choice]  # as if a taint had removed the choice
    partial = _prioritize(svc, pod, rest)
    assert [s["Host"] for s in partial] == rest
    assert sorted(s["Score"] for s in partial)[-1] == 10
    assert svc.counters.node_fallbacks == 1
