"""Fuzzing: malformed bodies, missing keys, unknown nodes and absurd annotations give a
4xx or a named Error, never a crash, and the extender keeps serving afterwards."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from extender_builders import app_client, args, cluster, service, v1_pod
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpumosaic.apps.extender.vocabulary import GPU_CARD_MODEL, GPU_COUNT, GPU_INDEX, GPU_MILLI

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=12,
)
ANNOTATION_VALUES = st.one_of(
    st.integers(-5000, 5000).map(str),
    st.sampled_from(
        [
            *("", " ", "1e3", "0x10", "NaN", "inf", "½", "500m", "1|2", "-", "0-1-", "T4|", "|"),
            *("\u0663", "\uff15", "\u00b2", "9" * 30, "1" + "0" * 19, "0-\u0661"),
        ]
    ),
    st.text(max_size=6),
)
KEYS = [GPU_MILLI, GPU_COUNT, GPU_CARD_MODEL, GPU_INDEX]


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    path: Path = tmp_path_factory.mktemp("fuzz") / "s.db"
    return app_client(service(cluster(("V100", 2), ("T4", 1)), path))


def _alive(client) -> None:
    pod = v1_pod(milli=10)
    r = client.post("/filter", json=args(pod, ["n0"]))
    assert r.status_code == 200 and r.json()["NodeNames"] == ["n0"]


def _ok_or_named(r) -> None:
    assert r.status_code in (200, 400, 422), r.text
    body = r.json()
    if r.status_code != 200:
        assert isinstance(body, dict) and body["Error"]
        assert "internal error" not in body["Error"]


@pytest.mark.slow
@settings(max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=JSON, verb=st.sampled_from(["filter", "prioritize", "bind"]))
def test_arbitrary_json_never_crashes(client, body, verb) -> None:
    _ok_or_named(client.post(f"/{verb}", content=json.dumps(body)))


@settings(max_examples=40, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(raw=st.binary(max_size=64), verb=st.sampled_from(["filter", "prioritize", "bind"]))
def test_arbitrary_bytes_never_crash(client, raw, verb) -> None:
    _ok_or_named(client.post(f"/{verb}", content=raw))


@settings(max_examples=80, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    notes=st.dictionaries(st.sampled_from(KEYS), ANNOTATION_VALUES, max_size=4),
    names=st.lists(st.sampled_from(["n0", "n1", "ghost", "", "n0"]), max_size=5),
    cpu=st.sampled_from(
        ["1", "-1", "abc", "1e309", "0.001", "100000", "NaN", "inf", "\u0663", "9" * 40, "1e-999"]
    ),
)
@pytest.mark.slow  # hypothesis examples through the extender's HTTP API: seconds of CPU
def test_absurd_pods_get_a_named_error_or_a_sound_answer(client, notes, names, cpu) -> None:
    pod = v1_pod(annotations=notes, cpu=cpu)
    r = client.post("/filter", json=args(pod, names))
    _ok_or_named(r)
    body = r.json()
    if r.status_code == 200:
        assert set(body["NodeNames"] or []) <= set(names)  # always a subset of the input
        if body["Error"]:
            assert body["Error"].startswith("pod team-a/")
    r = client.post("/prioritize", json=args(pod, names))
    _ok_or_named(r)
    if r.status_code == 200:
        scores = r.json()
        assert len(scores) == len(names)  # an internal error would have answered []
        assert all(0 <= s["Score"] <= 10 for s in scores)
    meta = pod["metadata"]
    for node in {*names, "ghost"}:
        r = client.post(
            "/bind",
            json={
                "PodName": meta["name"],
                "PodNamespace": "team-a",
                "PodUID": meta["uid"],
                "Node": node,
            },
        )
        _ok_or_named(r)
        assert not r.json()["Error"].startswith("internal error")
    client.app.state.service.check_invariants()
    _alive(client)


def test_deep_nesting_is_a_400_not_a_crash(client) -> None:
    deep = "[" * 100_000 + "]" * 100_000
    r = client.post("/filter", content=deep)
    assert r.status_code == 400
    _alive(client)
