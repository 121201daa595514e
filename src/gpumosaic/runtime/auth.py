"""Who may call what: the service's token and the per-job tokens derived from it.

Without a token (loopback only) every caller may do everything. With one:

- a *user* presents the service token (``Authorization: Bearer <token>``): every route;
- a *job* gets only its own token, ``job_token(token, job_id)`` (an HMAC of the job id
  under the service token, in ``GPUMOSAIC_TOKEN``), which opens the lease routes of that
  job's leases and nothing else: not another job's lease, not the user routes. It is
  derived, not stored, so it holds across restarts and never touches the state file;
- ``/healthz`` answers anyone.

A header that is not ``Bearer <token>`` (any case, any spaces; ASCII) is simply not a
valid token (401).
"""

from __future__ import annotations

import hashlib
import hmac


def job_token(service_token: str, job_id: int) -> str:
    """The token a job's processes get: valid for that job's leases only."""
    digest = hmac.new(service_token.encode(), f"gpumosaic-job:{job_id}".encode(), hashlib.sha256)
    return f"job{job_id}.{digest.hexdigest()}"


def bearer(header: str | bytes | None) -> bytes | None:
    """The token of an ``Authorization`` header, as bytes, or None: the one parser of
    every route of both services (the API, ``/ui/stream``, the extender). The scheme is
    case-insensitive (RFC 9110) and spaces or tabs around the parts are ignored; any
    header value compares safely (non-ASCII is never a token)."""
    if not header:
        return None
    raw = header if isinstance(header, bytes) else header.encode("latin-1", "replace")
    parts = raw.split(None, 1)
    if len(parts) != 2 or parts[0].lower() != b"bearer":
        return None
    token = parts[1].strip()
    if not token or not token.isascii():
        return None
    return token


def token_ok(expected: str, header: str | bytes | None) -> bool:
    """``header`` carries ``expected`` (always true when no token is configured)."""
    if not expected:
        return True
    given = bearer(header)
    return given is not None and hmac.compare_digest(given, expected.encode())


def lease_job(lease_id: str) -> int | None:
    """The job a lease id belongs to (the driver names leases ``<job>-<round>-<hex>``)."""
    head = lease_id.partition("-")[0]
    return int(head) if head.isdigit() and len(head) < 20 else None


class Authority:
    def __init__(self, service_token: str) -> None:
        self.service_token = service_token

    @property
    def open(self) -> bool:
        return not self.service_token

    def is_user(self, header: str | bytes | None) -> bool:
        return token_ok(self.service_token, header)

    def may_use_lease(self, header: str | bytes | None, job_id: int | None) -> bool:
        """The service token, or the token of the job that owns the lease."""
        if self.is_user(header):
            return True
        given = bearer(header)
        if given is None or job_id is None:
            return False
        return hmac.compare_digest(given, job_token(self.service_token, job_id).encode())
