"""A stand-in API server on loopback that answers with recorded responses of the real API
shapes (golden/api/*.json), so that the official ``kubernetes`` client is exercised over
HTTP exactly as against a cluster: list, get, strategic-merge patch, the binding
subresource and watch streams. It records every write, in order."""

from __future__ import annotations

import copy
import json
import queue
import time
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request, Response
from fastapi.responses import JSONResponse, StreamingResponse

RECORDED = Path(__file__).parent / "golden" / "api"


def recorded(name: str) -> Any:
    return json.loads((RECORDED / name).read_text())


class FakeApiServer:
    def __init__(self) -> None:
        self.nodes = recorded("nodes.json")
        self.pods = recorded("pods.json")
        self.writes: list[tuple[str, str, Any]] = []  # (verb, pod, body)
        self.conflicts: set[str] = set()  # pod names whose binding answers 409
        self.events: dict[str, queue.Queue[dict[str, Any]]] = {
            "pods": queue.Queue(),
            "nodes": queue.Queue(),
        }
        self.app = self._build()

    def pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        for p in self.pods["items"]:
            if p["metadata"]["namespace"] == namespace and p["metadata"]["name"] == name:
                return p
        return None

    def push(self, kind: str, event_type: str, obj: dict[str, Any]) -> None:
        self.events[kind].put({"type": event_type, "object": obj})

    def _watch(self, kind: str, timeout_s: float) -> StreamingResponse:
        def lines():
            deadline = time.monotonic() + min(timeout_s, 5.0)
            while time.monotonic() < deadline:
                try:
                    event = self.events[kind].get(timeout=0.05)
                except queue.Empty:
                    continue
                yield json.dumps(event) + "\n"

        return StreamingResponse(lines(), media_type="application/json")

    def _build(self) -> FastAPI:
        app = FastAPI()

        @app.get("/api/v1/nodes")
        def list_nodes(watch: bool = False, timeoutSeconds: int = 1) -> Any:
            if watch:
                return self._watch("nodes", timeoutSeconds)
            return self.nodes

        @app.get("/api/v1/pods")
        def list_pods(fieldSelector: str = "", watch: bool = False, timeoutSeconds: int = 1) -> Any:
            if watch:
                return self._watch("pods", timeoutSeconds)
            body = copy.deepcopy(self.pods)
            excluded = {
                term.split("!=", 1)[1]
                for term in fieldSelector.split(",")
                if "status.phase!=" in term
            }
            body["items"] = [p for p in body["items"] if p["status"]["phase"] not in excluded]
            return body

        @app.get("/api/v1/namespaces/{namespace}/pods/{name}")
        def get_pod(namespace: str, name: str) -> Any:
            pod = self.pod(namespace, name)
            if pod is None:
                return JSONResponse(
                    {"kind": "Status", "apiVersion": "v1", "status": "Failure",
                     "message": f'pods "{name}" not found', "reason": "NotFound", "code": 404},
                    status_code=404,
                )  # fmt: skip
            return pod

        @app.patch("/api/v1/namespaces/{namespace}/pods/{name}")
        async def patch_pod(namespace: str, name: str, request: Request) -> Any:
            body = await request.json()
            self.writes.append(("patch", name, (request.headers["content-type"], body)))
            pod = self.pod(namespace, name)
            assert pod is not None
            pod["metadata"].setdefault("annotations", {}).update(body["metadata"]["annotations"])
            return pod

        @app.post("/api/v1/namespaces/{namespace}/pods/{name}/binding")
        async def bind(namespace: str, name: str, request: Request) -> Response:
            body = await request.json()
            self.writes.append(("binding", name, body))
            if name in self.conflicts:
                return JSONResponse(recorded("binding_conflict.json"), status_code=409)
            pod = self.pod(namespace, name)
            assert pod is not None
            pod["spec"]["nodeName"] = body["target"]["name"]
            return JSONResponse(recorded("binding_created.json"), status_code=201)

        return app
