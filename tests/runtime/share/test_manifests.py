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


def test_device_plugin_serves_the_daemon_sockets_and_the_copied_library() -> None:
    ds = yaml.safe_load((EXAMPLES / "daemonset.yaml").read_text())
    spec = ds["spec"]["template"]["spec"]
    daemon, plugin = (c["command"] for c in spec["containers"])
    assert daemon[:3] == ["gpumosaic", "share", "daemon"]
    assert plugin[:3] == ["gpumosaic", "share", "device-plugin"]
    for flag in ("--socket-dir", "--gpus"):
        assert daemon[daemon.index(flag) + 1] == plugin[plugin.index(flag) + 1]
    copied = spec["initContainers"][0]["command"][-1].split()[-1]  # .../libgpumosaic_share.so
    host_lib_dir = next(v["hostPath"]["path"] for v in spec["volumes"] if v["name"] == "lib")
    assert copied.endswith("/libgpumosaic_share.so")
    assert plugin[plugin.index("--lib") + 1] == f"{host_lib_dir}/libgpumosaic_share.so"
    pod = yaml.safe_load((EXAMPLES / "pod.yaml").read_text())
    limits = pod["spec"]["containers"][0]["resources"]["limits"]
    assert limits == {"gpumosaic.io/share": "1"}
