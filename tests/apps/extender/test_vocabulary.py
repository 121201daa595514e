"""The alibabacloud.com vocabulary and the CPU/memory mapping, as table tests."""

from __future__ import annotations

import pytest
from extender_builders import v1_node, v1_pod

from gpumosaic.apps.extender.vocabulary import (
    GPU_INDEX,
    PodError,
    bound_pod,
    node_reading,
    pod_object,
    pod_request,
)
from gpumosaic.model.job import JobSpec


@pytest.mark.parametrize(
    ("milli", "count", "expected"),
    [
        (None, None, (0, 0)),  # no annotation: a CPU-only pod
        ("460", None, (1, 460)),  # a share of one GPU; the count defaults to 1
        (None, "4", (4, 1000)),  # whole GPUs; the share defaults to 1000
        ("1000", "8", (8, 1000)),
        ("0", None, (0, 0)),  # 0 milli and no count: CPU-only
        (" 250 ", "1", (1, 250)),  # whitespace is tolerated
    ],
)
def test_gpu_annotations(milli, count, expected) -> None:
    r = pod_request(v1_pod(milli=milli, count=count))
    assert (r.num_gpu, r.gpu_milli) == expected


@pytest.mark.parametrize(
    ("milli", "count", "message"),
    [
        ("-5", None, "gpu-milli='-5' is not a non-negative integer"),
        ("1001", None, "gpu-milli=1001 is over 1000"),
        ("half", None, "is not a non-negative integer"),
        ("0.5", None, "is not a non-negative integer"),
        ("500", "2", "below 1000 is only allowed with alibabacloud.com/gpu-count=1"),
        ("0", "1", "gpu-count=1 with alibabacloud.com/gpu-milli=0"),
        (None, "1e3", "gpu-count='1e3' is not a non-negative integer"),
    ],
)
def test_absurd_annotations_are_named(milli, count, message) -> None:
    with pytest.raises(PodError, match="pod team-a/") as err:
        pod_request(v1_pod(milli=milli, count=count))
    assert message in str(err.value)


def test_card_models_are_split_on_bars_and_upper_cased() -> None:
    r = pod_request(v1_pod(milli=300, models="t4|V100M32| a100"))
    assert r.allowed_models == frozenset({"T4", "V100M32", "A100"})


@pytest.mark.parametrize(
    ("cpu", "memory", "expected"),
    [
        ("500m", "512Mi", (500, 512)),
        ("2", "1Gi", (2000, 1024)),
        ("0.1", "1G", (100, 954)),  # 10^9 bytes = 953.67 MiB, rounded up
        ("1001m", "1.5Gi", (1001, 1536)),
    ],
)
def test_cpu_and_memory_requests_map_to_milli_and_mib(cpu, memory, expected) -> None:
    r = pod_request(v1_pod(cpu=cpu, memory=memory))
    assert (r.cpu_milli, r.memory_mib) == expected


def test_effective_request_counts_init_containers_and_overhead() -> None:
    pod = v1_pod(cpu="1", memory="1Gi")
    pod["spec"]["containers"].append({"name": "b", "resources": {"requests": {"cpu": "1"}}})
    pod["spec"]["initContainers"] = [{"name": "i", "resources": {"requests": {"cpu": "3"}}}]
    pod["spec"]["overhead"] = {"cpu": "250m", "memory": "64Mi"}
    r = pod_request(pod)
    assert (r.cpu_milli, r.memory_mib) == (3000 + 250, 1024 + 64)  # max(1+1, 3) + overhead


def test_bad_quantities_are_named() -> None:
    with pytest.raises(PodError, match=r"containers\[0\] cpu='lots' is not a Kubernetes quantity"):
        pod_request(v1_pod(cpu="lots"))


def test_bound_pod_reads_the_gpu_index() -> None:
    pod = v1_pod(count=2, annotations={GPU_INDEX: "1-3"})
    pod["spec"]["nodeName"] = "n4"
    pod["status"] = {"phase": "Running"}
    bp = bound_pod(pod)
    assert bp is not None and (bp.node, bp.gpus) == ("n4", (1, 3))
    pod["status"]["phase"] = "Succeeded"
    assert bound_pod(pod) is None  # finished pods hold nothing
    pod["status"]["phase"] = "Running"
    pod["metadata"]["annotations"][GPU_INDEX] = "1"
    with pytest.raises(PodError, match="names 1 GPUs"):
        bound_pod(pod)


def test_node_reading_and_unknown_models() -> None:
    reading = node_reading(v1_node("a", "A100", 8, cpu="96", memory="512Gi"))
    assert (reading.spec.num_gpus, reading.spec.cpu_milli, reading.spec.memory_mib) == (
        8,
        96_000,
        512 * 1024,
    )
    assert reading.spec.gpu.name == "A100" and not reading.unknown_model
    odd = node_reading(v1_node("b", "RTX-4090", 2))
    assert odd.unknown_model and odd.spec.gpu.name == "RTX-4090" and odd.spec.gpu.full_w == 0


def test_pod_object_round_trips_a_job() -> None:
    job = JobSpec(
        id=1, arrival_s=0, job_type="t", num_gpu=1, gpu_milli=460, work=0,
        cpu_milli=12_000, memory_mib=16_384, allowed_models=frozenset({"T4", "P100"}),
    )  # fmt: skip
    r = pod_request(pod_object(job, "p", "ns", "u"))
    assert (r.num_gpu, r.gpu_milli, r.cpu_milli, r.memory_mib) == (1, 460, 12_000, 16_384)
    assert r.allowed_models == job.allowed_models


def test_pod_object_matches_the_clients_serializer() -> None:
    """The replay's hand-built pods have the shape of a V1Pod serialized by the client."""
    from kubernetes import client

    job = JobSpec(id=1, arrival_s=0, job_type="t", num_gpu=2, gpu_milli=1000, work=0)
    plain = pod_object(job, "p", "ns", "u")
    api = client.ApiClient()
    model = api._ApiClient__deserialize(plain, "V1Pod")  # the client's own decoder
    assert api.sanitize_for_serialization(model) == plain
