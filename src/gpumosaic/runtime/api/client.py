"""A small HTTP client of the round service (stdlib only), for the CLI and scripts."""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from typing import Any

from gpumosaic.errors import InputError

DEFAULT_SERVER = "http://127.0.0.1:8470"
PAGE = 500  # jobs per request when listing (the service allows up to admission.MAX_PAGE)


class ServiceClient:
    def __init__(self, server: str = DEFAULT_SERVER, token: str = "", timeout_s: float = 30.0):
        self.server = server.rstrip("/")
        self.token = token
        self.timeout_s = timeout_s

    def request(self, method: str, path: str, body: Any = None) -> Any:
        """The decoded answer; a 4xx becomes an ``InputError`` whose message names the
        field FastAPI reported (one line for the CLI)."""
        return self._exchange(method, path, body)[0]

    def _exchange(
        self, method: str, path: str, body: Any = None, *, raw: bool = False
    ) -> tuple[Any, dict[str, str]]:
        """The decoded answer (bytes with ``raw``) and its headers (lower-case names)."""
        data = None if body is None else json.dumps(body).encode()
        headers = {"Content-Type": "application/json"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        try:
            req = urllib.request.Request(
                self.server + path, data=data, headers=headers, method=method
            )
        except ValueError as err:
            raise InputError(f"not a URL: {err}", field="--server", value=self.server) from None
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:
                raw_bytes = resp.read()
                answer_headers = {k.lower(): v for k, v in resp.headers.items()}
                if raw:
                    return raw_bytes, answer_headers
                if resp.headers.get_content_type() == "application/json":
                    return json.loads(raw_bytes or b"null"), answer_headers
                return raw_bytes.decode("utf-8", "replace"), answer_headers
        except urllib.error.HTTPError as err:
            raise _http_error(err) from None
        except (urllib.error.URLError, OSError, ValueError) as err:
            reason = getattr(err, "reason", err)
            raise InputError(f"cannot reach {self.server}: {reason}", field="--server") from None

    def submit(self, job: dict[str, Any]) -> int:
        return int(self.request("POST", "/v1/jobs", job)["id"])

    def submit_batch(self, jobs: list[dict[str, Any]]) -> list[int]:
        """All of ``jobs`` admitted, or none (an ``InputError`` whose ``row`` is the
        1-based position of the first refused job)."""
        return [int(i) for i in self.request("POST", "/v1/jobs/batch", {"jobs": jobs})["ids"]]

    def iter_jobs(
        self, state: str | None = None, name: str | None = None, after: int = 0
    ) -> Iterator[dict[str, Any]]:
        """Every job with an id above ``after`` (of ``state``, named ``name``, when
        given), a page at a time (the service never sends them all at once)."""
        filters = {k: v for k, v in (("state", state), ("name", name)) if v is not None}
        while True:
            query = {"limit": PAGE, "after": after, **filters}
            rows, headers = self._exchange("GET", "/v1/jobs?" + urllib.parse.urlencode(query))
            yield from rows
            nxt = headers.get("x-next-after")
            if not nxt or not rows:
                return
            after = int(nxt)

    def jobs(self, state: str | None = None, name: str | None = None) -> list[dict[str, Any]]:
        return list(self.iter_jobs(state, name))

    def job(self, job_id: int) -> dict[str, Any]:
        return dict(self.request("GET", f"/v1/jobs/{job_id}"))

    def logs(self, job_id: int, tail: int) -> str:
        return str(self.request("GET", f"/v1/jobs/{job_id}/logs?tail={tail}"))

    def log_bytes(self, job_id: int, offset: int) -> tuple[bytes, int]:
        """The job's output from byte ``offset`` on (at most 16 MiB a call), and the
        offset to read from next (``logs --follow``)."""
        data, headers = self._exchange("GET", f"/v1/jobs/{job_id}/logs?offset={offset}", raw=True)
        return bytes(data), int(headers.get("x-log-end", offset + len(data)))

    def log_tail(self, job_id: int, tail: int) -> tuple[bytes, int]:
        """The last ``tail`` bytes of the job's output, and the offset after them."""
        data, headers = self._exchange("GET", f"/v1/jobs/{job_id}/logs?tail={tail}", raw=True)
        return bytes(data), int(headers.get("x-log-end", len(data)))

    def cancel(self, job_id: int) -> dict[str, Any]:
        return dict(self.request("POST", f"/v1/jobs/{job_id}/cancel"))

    def summary(self) -> dict[str, Any]:
        """The run so far, summarised as a simulation is (``GET /v1/summary``)."""
        return dict(self.request("GET", "/v1/summary"))


def _http_error(err: urllib.error.HTTPError) -> InputError:
    try:
        detail = json.loads(err.read() or b"null")
    except ValueError:
        detail = None
    detail = detail.get("detail") if isinstance(detail, dict) else detail
    if err.code == 422 and isinstance(detail, list) and detail and isinstance(detail[0], dict):
        first = detail[0]
        loc = [p for p in first.get("loc", []) if p not in ("body", "query", "path")]
        row = None
        if len(loc) >= 2 and loc[0] == "jobs" and isinstance(loc[1], int):
            row, loc = loc[1] + 1, loc[2:]  # a batch: which job
        field = ".".join(str(p) for p in loc) or None
        return InputError(str(first.get("msg", "invalid")), row=row, field=field)
    return InputError(f"HTTP {err.code}: {detail if detail is not None else err.reason}")
