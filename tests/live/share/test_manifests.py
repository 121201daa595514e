"""The Kubernetes manifests in docs/examples/share validate against the API schemas."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

kubernetes_validate = pytest.importorskip("kubernetes_validate")

EXAMPLES = Path(__file__).parents[3] / "docs" / "examples" / "share"


@pytest.mark.parametrize("name", ["daemonset.yaml", "pod.yaml"])
def test_manifest_is_valid_kubernetes(name: str) -> None:
    doc = yaml.safe_load((EXAMPLES / name).read_text())
    kubernetes_validate.validate(doc, "1.30.0", strict=True)


def test_pod_uses_the_daemon_socket_and_library() -> None:
    ds = yaml.safe_load((EXAMPLES / "daemonset.yaml").read_text())
    pod = yaml.safe_load((EXAMPLES / "pod.yaml").read_text())
    args = ds["spec"]["template"]["spec"]["containers"][0]["command"]
    sock_dir = args[args.index("--socket-dir") + 1]
    env = {e["name"]: e["value"] for e in pod["spec"]["containers"][0]["env"]}
    assert env["GPUMOSAIC_SHARE_SOCKET"] == f"{sock_dir}/gpu0.sock"
    assert env["LD_PRELOAD"].endswith("libgpumosaic_share.so")
