"""hippocamp: scoped long-term memory and versioned artifacts for AI
agents. `Client` / `AsyncClient` speak API v1; `hippocamp.adk` holds the
memory and artifact services for Google's ADK."""

from .client import AsyncClient, Client, artifact_url, base_url
from .errors import (
    Conflict,
    DeliveryFailed,
    DeliveryTimeout,
    Forbidden,
    HippocampError,
    InvalidArgument,
    InvalidReply,
    NotFound,
    Overloaded,
    PayloadTooLarge,
    QuotaExceeded,
    Timeout,
    Unauthorized,
    Unavailable,
)

__all__ = [
    "AsyncClient",
    "Client",
    "Conflict",
    "DeliveryFailed",
    "DeliveryTimeout",
    "Forbidden",
    "HippocampError",
    "InvalidArgument",
    "InvalidReply",
    "NotFound",
    "Overloaded",
    "PayloadTooLarge",
    "QuotaExceeded",
    "Timeout",
    "Unauthorized",
    "Unavailable",
    "artifact_url",
    "base_url",
]
