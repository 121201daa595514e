"""The API-server side, through the official ``kubernetes`` client.

At start: list nodes and the pods that are not finished; every bound pod's share comes
back from its ``alibabacloud.com/gpu-index`` annotation, so the extender holds exactly
what the cluster holds after any restart (pods never stay Pending because of us). Then
two watches (pods, nodes) keep the state current: a finished or deleted pod frees its
share, a pod bound by someone else is adopted, a node added, removed or relabelled
rebuilds the table. A watch that expires (HTTP 410) relists everything.

Bind: patch the pod's annotations (``gpu-index``, ``assume-time``) first, then create the
Binding, so a pod is never bound without the record of its GPUs.
"""

from __future__ import annotations

import json
import logging
import threading
from pathlib import Path
from typing import Any

from kubernetes import client, config, watch
from kubernetes.client.rest import ApiException
from kubernetes.config.config_exception import ConfigException

from gpumosaic.apps.extender.backend import BindError, RngState, Snapshot
from gpumosaic.apps.extender.service import ExtenderService
from gpumosaic.apps.extender.vocabulary import (
    ASSUME_TIME,
    NodeReading,
    PodError,
    PodRequest,
    node_reading,
)
from gpumosaic.errors import InputError

log = logging.getLogger("gpumosaic.extender.kube")
ACTIVE_PODS = "status.phase!=Succeeded,status.phase!=Failed"
WATCH_TIMEOUT_S = 300
REQUEST_TIMEOUT_S = 10.0


def _api_message(err: ApiException) -> str:
    try:
        return str(json.loads(err.body or "{}").get("message") or err.reason)
    except (ValueError, AttributeError):
        return str(err.reason)


def _version(listed: Any) -> str:
    meta = getattr(listed, "metadata", None)
    return str(getattr(meta, "resource_version", "") or "")


def _assume_time(pod: dict[str, Any]) -> int:
    raw = ((pod.get("metadata") or {}).get("annotations") or {}).get(ASSUME_TIME, "")
    return int(raw) if str(raw).isdigit() else 0


class KubeBackend:
    kind = "kubernetes"
    releases_by_request = False

    def __init__(self, api: client.ApiClient) -> None:
        self.api = api
        self.core = client.CoreV1Api(api)
        self.pods_version = ""
        self.nodes_version = ""
        self.unreadable_nodes: list[str] = []

    @classmethod
    def connect(cls, kubeconfig: Path | None) -> KubeBackend:
        configuration = client.Configuration()
        try:
            if kubeconfig is not None:
                config.load_kube_config(str(kubeconfig), client_configuration=configuration)
            else:
                try:
                    config.load_incluster_config(client_configuration=configuration)
                except ConfigException:
                    config.load_kube_config(client_configuration=configuration)
        except (ConfigException, OSError) as err:
            raise InputError(
                f"no Kubernetes API server to talk to ({err}); give --kubeconfig, run in the "
                "cluster, or use --cluster for the standalone mode",
                field="--kubeconfig",
            ) from None
        return cls(client.ApiClient(configuration))

    def _plain(self, obj: Any) -> dict[str, Any]:
        plain: dict[str, Any] = self.api.sanitize_for_serialization(obj)
        return plain

    def list_nodes(self) -> tuple[NodeReading, ...]:
        listed = self.core.list_node(_request_timeout=REQUEST_TIMEOUT_S)
        self.nodes_version = _version(listed)
        return self.readings([self._plain(n) for n in listed.items])

    def readings(self, nodes: list[dict[str, Any]]) -> tuple[NodeReading, ...]:
        out = []
        self.unreadable_nodes = []
        for node in nodes:
            try:
                out.append(node_reading(node))
            except PodError as err:
                self.unreadable_nodes.append(str(err))
                log.warning("node skipped: %s", err)
        return tuple(out)

    def list_pods(self) -> tuple[dict[str, Any], ...]:
        listed = self.core.list_pod_for_all_namespaces(
            field_selector=ACTIVE_PODS, _request_timeout=REQUEST_TIMEOUT_S
        )
        self.pods_version = _version(listed)
        pods = [self._plain(p) for p in listed.items]
        return tuple(sorted(pods, key=_assume_time))  # bind order, as they were placed

    def load(self) -> Snapshot:
        try:
            return Snapshot(self.list_nodes(), self.list_pods())
        except ApiException as err:
            raise InputError(
                f"the API server refused to list nodes and pods: {err.status} "
                f"{_api_message(err)} (see deploy/rbac.yaml for the verbs needed)"
            ) from None

    def save_rng_initial(self, state: RngState) -> None:
        return None  # the cluster's annotations are the state; decisions restart fresh

    def bind(
        self, request: PodRequest, node: str, annotations: dict[str, str], rng_state: RngState
    ) -> None:
        try:
            self.core.patch_namespaced_pod(
                request.name,
                request.namespace,
                {"metadata": {"annotations": annotations}},
                _request_timeout=REQUEST_TIMEOUT_S,
            )
            body = client.V1Binding(
                metadata=client.V1ObjectMeta(
                    name=request.name, namespace=request.namespace, uid=request.uid or None
                ),
                target=client.V1ObjectReference(api_version="v1", kind="Node", name=node),
            )
            # The pods/binding subresource, as kube-scheduler's DefaultBinder uses. The
            # answer is a Status, not a Binding: do not let the client deserialize it.
            self.core.create_namespaced_pod_binding(
                request.name,
                request.namespace,
                body,
                _preload_content=False,
                _request_timeout=REQUEST_TIMEOUT_S,
            )
        except ApiException as err:
            raise BindError(f"API server: {err.status} {_api_message(err)}") from None
        except Exception as err:  # network errors of urllib3
            raise BindError(f"API server unreachable: {type(err).__name__}: {err}") from None

    def release(self, key: str) -> None:
        return None  # the API server already forgot the pod

    def health(self) -> str:
        return ""  # the API server holds the state; a failed bind is answered per pod

    def read_pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        try:
            pod = self.core.read_namespaced_pod(name, namespace, _request_timeout=REQUEST_TIMEOUT_S)
        except ApiException:
            return None
        return self._plain(pod)


class Watcher:
    """Two watch loops in daemon threads; ``stop`` ends them within ``timeout_s``."""

    def __init__(
        self, backend: KubeBackend, service: ExtenderService, timeout_s: int = WATCH_TIMEOUT_S
    ) -> None:
        self.backend = backend
        self.service = service
        self.timeout_s = timeout_s
        self._stop = threading.Event()
        self._watches: list[watch.Watch] = []
        self._threads = [
            threading.Thread(target=self._loop, args=(self._pods_once,), daemon=True),
            threading.Thread(target=self._loop, args=(self._nodes_once,), daemon=True),
        ]
        self._nodes: dict[str, dict[str, Any]] = {}
        self.events = 0
        self.relists = 0

    def start(self) -> None:
        for t in self._threads:
            t.start()

    def stop(self) -> None:
        self._stop.set()
        for w in self._watches:
            w.stop()
        for t in self._threads:
            t.join(self.timeout_s + REQUEST_TIMEOUT_S)

    def _loop(self, once: Any) -> None:
        while not self._stop.is_set():
            try:
                once()
            except ApiException as err:
                if err.status == 410:  # the resource version expired: list again
                    self._relist()
                else:
                    log.warning("watch failed: %s %s", err.status, _api_message(err))
                    self._stop.wait(1.0)
            except Exception as err:  # the connection dropped: retry after a pause
                log.warning("watch failed: %s: %s", type(err).__name__, err)
                self._stop.wait(1.0)

    def _relist(self) -> None:
        self.relists += 1
        snapshot = self.backend.load()
        self.service.resync(snapshot.nodes, snapshot.pods)

    def _stream(self, list_call: Any, version: str, **kwargs: Any) -> Any:
        w = watch.Watch()
        self._watches.append(w)
        return w.stream(
            list_call,
            resource_version=version,
            timeout_seconds=self.timeout_s,
            _request_timeout=self.timeout_s + REQUEST_TIMEOUT_S,
            **kwargs,
        )

    def _pods_once(self) -> None:
        core = self.backend.core
        for event in self._stream(core.list_pod_for_all_namespaces, self.backend.pods_version):
            if self._stop.is_set():
                return
            pod = event["raw_object"]
            self.backend.pods_version = pod.get("metadata", {}).get("resourceVersion", "")
            self.events += 1
            self.service.on_pod(event["type"], pod)

    def _nodes_once(self) -> None:
        core = self.backend.core
        if not self._nodes:
            listed = core.list_node(_request_timeout=REQUEST_TIMEOUT_S)
            plain = [self.backend._plain(n) for n in listed.items]
            self._nodes = {str(n["metadata"]["name"]): n for n in plain}
            self.backend.nodes_version = _version(listed)
        for event in self._stream(core.list_node, self.backend.nodes_version):
            if self._stop.is_set():
                return
            node = event["raw_object"]
            meta = node.get("metadata", {})
            self.backend.nodes_version = meta.get("resourceVersion", "")
            self.events += 1
            before = self.backend.readings(list(self._nodes.values()))
            if event["type"] == "DELETED":
                self._nodes.pop(meta.get("name"), None)
            else:
                self._nodes[meta.get("name")] = node
            after = self.backend.readings(list(self._nodes.values()))
            if after != before:
                self.service.replace_nodes(after)
