"""deploy/: the manifests validate offline against the Kubernetes schemas (strict: no
unknown field), and the KubeSchedulerConfiguration profile says what the docs promise."""

from __future__ import annotations

from pathlib import Path

import kubernetes_validate
import pytest
import yaml

DEPLOY = Path(__file__).resolve().parents[3] / "deploy"
K8S_VERSION = "1.30.0"
MANIFESTS = [
    "rbac.yaml",
    "configmap.yaml",
    "deployment.yaml",
    "example-pod.yaml",
    "example-node-patch.yaml",
]
# Fields of Extender in k8s.io/kube-scheduler/config/v1 types.go (KubeSchedulerConfiguration
# is not among kubernetes-validate's schemas, so the profile is checked against these).
EXTENDER_FIELDS = {
    "urlPrefix", "filterVerb", "preemptVerb", "prioritizeVerb", "weight", "bindVerb",
    "enableHTTPS", "tlsConfig", "httpTimeout", "nodeCacheCapable", "managedResources",
    "ignorable",
}  # fmt: skip


def documents(name: str) -> list[dict]:
    return [d for d in yaml.safe_load_all((DEPLOY / name).read_text()) if d]


@pytest.mark.parametrize("name", MANIFESTS)
def test_manifests_validate_strictly(name: str) -> None:
    docs = documents(name)
    assert docs
    for doc in docs:
        kubernetes_validate.validate(doc, K8S_VERSION, strict=True)


def test_a_typo_is_caught_by_the_strict_validation() -> None:
    doc = documents("deployment.yaml")[0]
    doc["spec"]["template"]["spec"]["containers"][0]["imagePullPolicyy"] = "Always"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(doc, K8S_VERSION, strict=True)


def test_rbac_grants_only_the_verbs_the_extender_uses() -> None:
    role = next(d for d in documents("rbac.yaml") if d["kind"] == "ClusterRole")
    granted = {(r, v) for rule in role["rules"] for r in rule["resources"] for v in rule["verbs"]}
    assert granted == {
        ("nodes", "get"), ("nodes", "list"), ("nodes", "watch"),
        ("pods", "get"), ("pods", "list"), ("pods", "watch"), ("pods", "patch"),
        ("pods/binding", "create"),
    }  # fmt: skip


def test_scheduler_profile() -> None:
    config = documents("scheduler-config.yaml")[0]
    assert config["apiVersion"] == "kubescheduler.config.k8s.io/v1"
    assert config["kind"] == "KubeSchedulerConfiguration"
    assert [p["schedulerName"] for p in config["profiles"]] == ["gpumosaic"]
    (extender,) = config["extenders"]
    assert set(extender) <= EXTENDER_FIELDS
    assert extender["nodeCacheCapable"] is True
    assert extender["ignorable"] is False
    assert extender["httpTimeout"] == "10s"
    assert (extender["filterVerb"], extender["prioritizeVerb"], extender["bindVerb"]) == (
        "filter", "prioritize", "bind",
    )  # fmt: skip
    resources = {r["name"]: r["ignoredByScheduler"] for r in extender["managedResources"]}
    assert resources == {"alibabacloud.com/gpu-milli": True, "alibabacloud.com/gpu-count": True}
    assert 1 <= extender["weight"] <= 100  # kube-scheduler rejects weights outside this


def test_the_configmap_carries_the_same_profile() -> None:
    (configmap,) = documents("configmap.yaml")
    embedded = yaml.safe_load(configmap["data"]["scheduler-config.yaml"])
    assert embedded == documents("scheduler-config.yaml")[0]


def test_the_deployment_runs_the_profile_and_the_extender_together() -> None:
    deployment = documents("deployment.yaml")[0]
    containers = {c["name"]: c for c in deployment["spec"]["template"]["spec"]["containers"]}
    assert (
        "--config=/etc/gpumosaic/scheduler-config.yaml" in containers["kube-scheduler"]["command"]
    )
    args = containers["extender"]["args"]
    assert args[0] == "extender" and "--port=8888" in args


def test_the_example_pod_is_understood_by_the_extender() -> None:
    from gpumosaic.apps.extender.vocabulary import pod_request

    request = pod_request(documents("example-pod.yaml")[0])
    assert (request.num_gpu, request.gpu_milli, request.cpu_milli) == (1, 460, 4000)
    assert request.allowed_models == frozenset({"T4", "P100"})
