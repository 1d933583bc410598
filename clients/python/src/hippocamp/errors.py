"""Typed errors mirroring the server's `code`s."""

from __future__ import annotations


class HippocampError(Exception):
    """An error reply of the server (or the transport)."""

    code: str = "error"

    def __init__(self, message: str, *, code: str | None = None, status: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        self.status = status

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(code={self.code!r}, status={self.status!r}, {self.message!r})"
        )


class InvalidArgument(HippocampError):
    """The request is malformed or out of a documented bound (400)."""


class Unauthorized(HippocampError):
    """No valid bearer token (401)."""


class Forbidden(HippocampError):
    """The token does not grant this scope or operation (403)."""


class NotFound(HippocampError):
    """No such entry, artifact, version or job (404)."""


class Conflict(HippocampError):
    """An idempotency, epoch or state conflict (409)."""


class QuotaExceeded(HippocampError):
    """A per-scope or global quota refused the write (429); it does not
    clear by waiting."""


class PayloadTooLarge(InvalidArgument):
    """One value is over a size limit named in the message (413): the
    request body, an artifact or an entry's content. The same value never
    fits later."""


class Overloaded(HippocampError):
    """The server or a provider asks to slow down (429/503)."""


class Unavailable(HippocampError):
    """The server or a backend cannot serve now (5xx)."""


class Timeout(HippocampError):
    """The deadline expired before the operation completed (504)."""


class InvalidReply(HippocampError):
    """A backend returned something outside the request's scope, or a reply
    did not parse (502)."""


class DeliveryTimeout(HippocampError):
    """Queued events were not delivered within the wait: they stay queued
    and are delivered later; `job_ids` names the jobs still pending."""

    code = "delivery_timeout"

    def __init__(self, message: str, *, job_ids: list[str]) -> None:
        super().__init__(message)
        self.job_ids = job_ids


class DeliveryFailed(HippocampError):
    """A queued job ended without delivering its events (failed or
    cancelled); `job_id` names it, `state` and `last_error` say how."""

    code = "delivery_failed"

    def __init__(self, message: str, *, job_id: str, state: str, last_error: object) -> None:
        super().__init__(message)
        self.job_id = job_id
        self.state = state
        self.last_error = last_error


_BY_CODE: dict[str, type[HippocampError]] = {
    "invalid_argument": InvalidArgument,
    "invalid_config": InvalidArgument,
    "unsupported_media_type": InvalidArgument,
    "sensitive_content": InvalidArgument,
    "unauthorized": Unauthorized,
    "forbidden": Forbidden,
    "not_found": NotFound,
    "idempotency_conflict": Conflict,
    "stale_epoch": Conflict,
    "future_epoch": Conflict,
    "job_active": Conflict,
    "source_gone": Conflict,
    "consolidation_running": Conflict,
    "run_conflict": Conflict,
    "quota_exceeded": QuotaExceeded,
    "payload_too_large": PayloadTooLarge,
    "overloaded": Overloaded,
    "max_active_scopes_reached": Overloaded,
    "unavailable": Unavailable,
    "memory_disabled": Unavailable,
    "outbox_unavailable": Unavailable,
    "invalid_reply": InvalidReply,
    "timeout": Timeout,
}


def from_reply(status: int, body: object) -> HippocampError:
    """The typed error of an error reply."""
    code, message = "error", f"HTTP {status}"
    if isinstance(body, dict):
        code = str(body.get("code", code))
        message = str(body.get("message", message))
    cls = _BY_CODE.get(code)
    if cls is None:
        cls = {
            400: InvalidArgument,
            401: Unauthorized,
            403: Forbidden,
            404: NotFound,
            409: Conflict,
            413: PayloadTooLarge,
            429: QuotaExceeded,
        }.get(status, Unavailable if status >= 500 else HippocampError)
    return cls(message, code=code, status=status)
