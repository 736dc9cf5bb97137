"""Typed Kubernetes API errors.

Controllers branch on the kind of failure (a 409 means requeue, a 404 on delete means done, a 410
means relist), so every non-2xx answer becomes one of these classes carrying the server's
``Status`` message, reason and causes; nothing upstream of the client parses HTTP codes.
"""

from __future__ import annotations

from typing import Any


class ApiError(Exception):
    """Any non-success answer from the apiserver (or a transport failure with status 0)."""

    status: int = 0

    def __init__(self, status: int, body: dict[str, Any] | str | None, method: str, path: str):
        self.status = status
        self.method = method
        self.path = path
        self.body: dict[str, Any] = body if isinstance(body, dict) else {}
        self.message: str = self.body.get("message") or (body if isinstance(body, str) else "")
        self.reason: str = self.body.get("reason", "")
        details = self.body.get("details") or {}
        self.causes: list[dict[str, Any]] = list(details.get("causes") or [])
        self.retry_after: float | None = details.get("retryAfterSeconds")
        super().__init__(f"{method} {path}: {status} {self.reason}: {self.message}".strip())


class BadRequest(ApiError):
    status = 400


class Unauthorized(ApiError):
    status = 401


class Forbidden(ApiError):
    status = 403


class NotFound(ApiError):
    status = 404


class MethodNotAllowed(ApiError):
    status = 405


class Conflict(ApiError):
    """409 with reason Conflict: a stale resourceVersion; the caller re-reads and retries."""

    status = 409


class AlreadyExists(Conflict):
    """409 with reason AlreadyExists: a create found the name taken."""


class Gone(ApiError):
    """410: the requested resourceVersion was compacted away; relist."""

    status = 410


class Invalid(ApiError):
    """422: the object failed validation; ``causes`` names the fields."""

    status = 422


class TooManyRequests(ApiError):
    status = 429


class ServerError(ApiError):
    status = 500


class WatchStalled(ApiError):
    """No byte arrived on a watch for its stall timeout: reconnect from the same version."""


_BY_STATUS: dict[int, type[ApiError]] = {
    400: BadRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    405: MethodNotAllowed,
    409: Conflict,
    410: Gone,
    422: Invalid,
    429: TooManyRequests,
}


def error_for(status: int, body: dict[str, Any] | str | None, method: str, path: str) -> ApiError:
    cls = _BY_STATUS.get(status)
    if status == 409 and isinstance(body, dict) and body.get("reason") == "AlreadyExists":
        cls = AlreadyExists
    if cls is None:
        cls = ServerError if status >= 500 else ApiError
    err = cls(status, body, method, path)
    err.status = status
    return err
