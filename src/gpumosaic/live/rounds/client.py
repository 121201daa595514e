"""A small HTTP client of the round service (stdlib only), for the CLI and scripts."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

from gpumosaic.errors import InputError

DEFAULT_SERVER = "http://127.0.0.1:8470"


class ServiceClient:
    def __init__(self, server: str = DEFAULT_SERVER, token: str = "", timeout_s: float = 30.0):
        self.server = server.rstrip("/")
        self.token = token
        self.timeout_s = timeout_s

    def request(self, method: str, path: str, body: Any = None) -> Any:
        """The decoded answer; a 4xx becomes an ``InputError`` whose message names the
        field FastAPI reported (one line for the CLI)."""
        data = None if body is None else json.dumps(body).encode()
        headers = {"Content-Type": "application/json"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        req = urllib.request.Request(self.server + path, data=data, headers=headers, method=method)
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:
                raw = resp.read()
                if resp.headers.get_content_type() == "application/json":
                    return json.loads(raw or b"null")
                return raw.decode("utf-8", "replace")
        except urllib.error.HTTPError as err:
            raise _http_error(err) from None
        except (urllib.error.URLError, OSError) as err:
            reason = getattr(err, "reason", err)
            raise InputError(f"cannot reach {self.server}: {reason}", field="--server") from None

    def submit(self, job: dict[str, Any]) -> int:
        return int(self.request("POST", "/v1/jobs", job)["id"])

    def jobs(self) -> list[dict[str, Any]]:
        return list(self.request("GET", "/v1/jobs"))

    def job(self, job_id: int) -> dict[str, Any]:
        return dict(self.request("GET", f"/v1/jobs/{job_id}"))

    def logs(self, job_id: int, tail: int) -> str:
        return str(self.request("GET", f"/v1/jobs/{job_id}/logs?tail={tail}"))

    def cancel(self, job_id: int) -> dict[str, Any]:
        return dict(self.request("POST", f"/v1/jobs/{job_id}/cancel"))


def _http_error(err: urllib.error.HTTPError) -> InputError:
    try:
        detail = json.loads(err.read() or b"null")
    except ValueError:
        detail = None
    detail = detail.get("detail") if isinstance(detail, dict) else detail
    if err.code == 422 and isinstance(detail, list) and detail:
        first = detail[0]
        loc = [str(p) for p in first.get("loc", []) if p != "body"]
        return InputError(str(first.get("msg", "invalid")), field=".".join(loc) or None)
    return InputError(f"HTTP {err.code}: {detail if detail is not None else err.reason}")
