"""Memory and artifact services for Google's ADK (google-adk >= 2.13) on
a hippocamp server.

Both construct from a `hippocamp://HOST:PORT` URI plus the token in
`HIPPOCAMP_TOKEN`, and accept the keyword arguments ADK's service
registry passes, so `adk web` / `adk api_server` load them from a
`services.py` in the agents directory:

    from google.adk.cli.service_registry import get_service_registry
    from hippocamp.adk import HippocampArtifactService, HippocampMemoryService

    registry = get_service_registry()
    registry.register_memory_service("hippocamp", HippocampMemoryService.from_uri)
    registry.register_artifact_service("hippocamp", HippocampArtifactService.from_uri)

then `adk api_server --memory_service_uri=hippocamp://127.0.0.1:8765
--artifact_service_uri=hippocamp://127.0.0.1:8765 AGENTS_DIR`.

Differences from ADK's in-memory services, on purpose: versions are
hippocamp's (1, 2, 3... and never reused after a delete, where ADK's
in-memory service counts from 0 and reuses), `canonical_uri` is the
version's API v1 URL, and search is hippocamp's BM25 (or hybrid) ranking.
"""

from __future__ import annotations

import asyncio
import datetime as _dt
import time
from collections.abc import Mapping, Sequence
from typing import Any

from google.adk.artifacts.base_artifact_service import (
    ArtifactVersion,
    BaseArtifactService,
    ensure_part,
)
from google.adk.errors.input_validation_error import InputValidationError
from google.adk.events import Event
from google.adk.memory import BaseMemoryService
from google.adk.memory.base_memory_service import SearchMemoryResponse
from google.adk.memory.memory_entry import MemoryEntry
from google.adk.sessions import Session
from google.genai import types

from .client import AsyncClient, artifact_url
from .errors import DeliveryFailed, DeliveryTimeout, NotFound, Unavailable

USER_PREFIX = "user:"
# How a text part is remembered on its version (so it loads as text).
_TEXT_KEY = "adk:text_part"
# A search returns at most this many entries (ADK's in-memory service: 10).
SEARCH_LIMIT = 10
# Events per request (the server's `max_events_per_request` default).
BATCH = 500
# How long `add_session_to_memory` waits, by default, for queued events to
# be delivered (read-your-writes), in seconds.
DELIVERY_TIMEOUT = 30.0
# A job's states once it has ended.
_FINISHED = ("succeeded", "failed", "cancelled")


def _iso(ms: int | None) -> str | None:
    if ms is None:
        return None
    return _dt.datetime.fromtimestamp(ms / 1000, tz=_dt.UTC).isoformat()


def _event_json(e: Event) -> dict[str, Any]:
    # ADK's own snake_case dump; the server reads it as it is.
    return e.model_dump(mode="json", exclude_none=True)


class HippocampMemoryService(BaseMemoryService):
    """ADK memory on hippocamp: sessions and events ingested idempotently
    by event id (through the server's queued ingestion when it has one),
    searched with hippocamp's ranking under the exact (app, user) scope.

    Read-your-writes by default: `add_session_to_memory` (and
    `add_events_to_memory`) return once the server has delivered the
    queued events, so a search right after finds them. Past
    `delivery_timeout` seconds it raises `DeliveryTimeout` naming the
    pending jobs (the events stay queued and are delivered later); a job
    that ends without delivering raises `DeliveryFailed`. With
    `wait_for_delivery=False` they return once the events are durably
    queued."""

    def __init__(
        self,
        uri: str = "hippocamp://127.0.0.1:8765",
        *,
        token: str | None = None,
        search_limit: int = SEARCH_LIMIT,
        wait_for_delivery: bool = True,
        delivery_timeout: float = DELIVERY_TIMEOUT,
        **_registry_kwargs: Any,
    ) -> None:
        self.client = AsyncClient(uri, token)
        self.search_limit = search_limit
        self.wait_for_delivery = wait_for_delivery
        self.delivery_timeout = delivery_timeout
        self._queued: bool | None = None

    @classmethod
    def from_uri(cls, uri: str, **kwargs: Any) -> HippocampMemoryService:
        """The factory ADK's service registry calls."""
        return cls(uri, **kwargs)

    async def _store(
        self, app_name: str, user_id: str, session_id: str, events: Sequence[Event]
    ) -> None:
        payload = [_event_json(e) for e in events]
        jobs: list[str] = []
        for i in range(0, len(payload), BATCH):
            batch = payload[i : i + BATCH]
            if self._queued is not False:
                try:
                    r = await self.client.ingest(app_name, user_id, session_id, batch)
                    self._queued = True
                    jobs.extend(j["id"] for j in r.get("jobs", []) if j["id"] not in jobs)
                    continue
                except Unavailable as e:
                    if e.code != "outbox_unavailable":
                        raise
                    # This server has no outbox: store synchronously.
                    self._queued = False
            await self.client.add_events(app_name, user_id, session_id, batch)
        if jobs and self.wait_for_delivery:
            await self._delivered(app_name, user_id, jobs)

    async def _delivered(self, app_name: str, user_id: str, jobs: list[str]) -> None:
        """Waits until every job in `jobs` has delivered, polling its
        status with growing pauses, within `delivery_timeout`."""
        until = time.monotonic() + self.delivery_timeout
        pending = list(jobs)
        pause = 0.02
        while True:
            still = []
            for job in pending:
                st = await self.client.job(app_name, user_id, job)
                state = st.get("state")
                if state == "succeeded":
                    continue
                if state in _FINISHED:
                    raise DeliveryFailed(
                        f"job {job} ended {state} without delivering its events: "
                        f"{st.get('last_error') or st.get('cancel_reason')}",
                        job_id=job,
                        state=str(state),
                        last_error=st.get("last_error"),
                    )
                still.append(job)
            if not still:
                return
            pending = still
            left = until - time.monotonic()
            if left <= 0:
                raise DeliveryTimeout(
                    f"queued events were not delivered within {self.delivery_timeout} s "
                    f"(jobs {', '.join(pending)} are pending; they are delivered later)",
                    job_ids=pending,
                )
            await asyncio.sleep(min(pause, left))
            pause = min(pause * 2, 0.5)

    async def add_session_to_memory(self, session: Session) -> None:
        await self._store(session.app_name, session.user_id, session.id, session.events)

    async def add_events_to_memory(
        self,
        *,
        app_name: str,
        user_id: str,
        events: Sequence[Event],
        session_id: str | None = None,
        custom_metadata: Mapping[str, object] | None = None,
    ) -> None:
        await self._store(app_name, user_id, session_id or "adk-events", events)

    async def add_memory(
        self,
        *,
        app_name: str,
        user_id: str,
        memories: Sequence[MemoryEntry],
        custom_metadata: Mapping[str, object] | None = None,
    ) -> None:
        for m in memories:
            text = "\n".join(p.text for p in (m.content.parts or []) if p.text)
            meta = {**dict(custom_metadata or {}), **(m.custom_metadata or {})}
            await self.client.add_entry(
                app_name,
                user_id,
                text,
                metadata=meta,
                idempotency_key=f"adk:{m.id}" if m.id else None,
            )

    async def search_memory(
        self, *, app_name: str, user_id: str, query: str
    ) -> SearchMemoryResponse:
        q = query.strip()
        if not any(c.isalnum() for c in q):
            return SearchMemoryResponse(memories=[])
        # The server's query limit is 4096 bytes: cut on a word boundary.
        raw = q.encode()
        if len(raw) > 4096:
            q = raw[:4096].decode(errors="ignore").rsplit(" ", 1)[0]
        r = await self.client.search(app_name, user_id, q, limit=self.search_limit)
        out = []
        for h in r["hits"]:
            prov = h.get("provenance") or {}
            author = prov.get("author")
            out.append(
                MemoryEntry(
                    # hippocamp's entry id: what `delete_memory` takes.
                    id=h["id"],
                    content=types.Content(
                        role="user" if author in (None, "user") else "model",
                        parts=[types.Part(text=h["content"])],
                    ),
                    author=author,
                    timestamp=_iso(h.get("timestamp_ms")),
                    custom_metadata=dict(h.get("metadata") or {}),
                )
            )
        return SearchMemoryResponse(memories=out)

    async def delete_memory(
        self, *, app_name: str, user_id: str, memory_id: str | None = None
    ) -> None:
        """Forgets one entry (by hippocamp entry id), or, without an id, the
        whole user (their memory and agent sessions; the erasure epoch
        fences anything still queued)."""
        if memory_id is None:
            await self.client.delete_user(app_name, user_id)
            return
        await self.client.delete_entry(app_name, user_id, memory_id)


class HippocampArtifactService(BaseArtifactService):
    """ADK artifacts on hippocamp: `user:`-prefixed filenames in the user
    scope, other filenames in the session's scope; versions, digests and
    listing are hippocamp's."""

    def __init__(
        self,
        uri: str = "hippocamp://127.0.0.1:8765",
        *,
        token: str | None = None,
        **_registry_kwargs: Any,
    ) -> None:
        self.client = AsyncClient(uri, token)

    @classmethod
    def from_uri(cls, uri: str, **kwargs: Any) -> HippocampArtifactService:
        """The factory ADK's service registry calls."""
        return cls(uri, **kwargs)

    @staticmethod
    def _where(filename: str, session_id: str | None) -> tuple[str | None, str]:
        if filename.startswith(USER_PREFIX):
            return None, filename[len(USER_PREFIX) :]
        if session_id is None:
            raise InputValidationError("Session ID must be provided for session-scoped artifacts.")
        return session_id, filename

    def _version(
        self, app: str, user: str, session: str | None, name: str, meta: dict[str, Any]
    ) -> ArtifactVersion:
        custom = {k: v for k, v in (meta.get("metadata") or {}).items() if k != _TEXT_KEY}
        return ArtifactVersion(
            version=meta["version"],
            canonical_uri=artifact_url(self.client.base, app, user, session, name, meta["version"]),
            custom_metadata=custom,
            create_time=meta["created_at_ms"] / 1000,
            mime_type=meta["mime_type"],
        )

    async def save_artifact(
        self,
        *,
        app_name: str,
        user_id: str,
        filename: str,
        artifact: types.Part | dict[str, Any],
        session_id: str | None = None,
        custom_metadata: dict[str, Any] | None = None,
    ) -> int:
        session, name = self._where(filename, session_id)
        part = ensure_part(artifact)
        meta = dict(custom_metadata or {})
        if part.inline_data is not None:
            data = part.inline_data.data or b""
            mime = part.inline_data.mime_type or "application/octet-stream"
        elif part.text is not None:
            data, mime = part.text.encode(), "text/plain"
            meta[_TEXT_KEY] = True
        else:
            raise InputValidationError("only inline data and text parts can be stored")
        r = await self.client.put_artifact(
            app_name, user_id, name, data, session=session, mime_type=mime, metadata=meta
        )
        return int(r["version"])

    async def load_artifact(
        self,
        *,
        app_name: str,
        user_id: str,
        filename: str,
        session_id: str | None = None,
        version: int | None = None,
    ) -> types.Part | None:
        session, name = self._where(filename, session_id)
        try:
            meta = await self.client.artifact_meta(
                app_name, user_id, name, session=session, version=version
            )
            data = await self.client.get_artifact(
                app_name, user_id, name, session=session, version=meta["version"]
            )
        except NotFound:
            return None
        if (meta.get("metadata") or {}).get(_TEXT_KEY):
            return types.Part(text=data.decode())
        return types.Part(inline_data=types.Blob(data=data, mime_type=meta["mime_type"]))

    async def list_artifact_keys(
        self, *, app_name: str, user_id: str, session_id: str | None = None
    ) -> list[str]:
        keys: list[str] = []
        if session_id is not None:
            keys += await self.client.all_names(app_name, user_id, session=session_id)
        keys += [USER_PREFIX + n for n in await self.client.all_names(app_name, user_id)]
        return sorted(keys)

    async def delete_artifact(
        self, *, app_name: str, user_id: str, filename: str, session_id: str | None = None
    ) -> None:
        session, name = self._where(filename, session_id)
        try:
            await self.client.delete_artifact(app_name, user_id, name, session=session)
        except NotFound:
            return

    async def list_versions(
        self, *, app_name: str, user_id: str, filename: str, session_id: str | None = None
    ) -> list[int]:
        return [
            v.version
            for v in await self.list_artifact_versions(
                app_name=app_name, user_id=user_id, filename=filename, session_id=session_id
            )
        ]

    async def list_artifact_versions(
        self, *, app_name: str, user_id: str, filename: str, session_id: str | None = None
    ) -> list[ArtifactVersion]:
        session, name = self._where(filename, session_id)
        try:
            items = await self.client.all_versions(app_name, user_id, name, session=session)
        except NotFound:
            return []
        return [self._version(app_name, user_id, session, name, m) for m in items]

    async def get_artifact_version(
        self,
        *,
        app_name: str,
        user_id: str,
        filename: str,
        session_id: str | None = None,
        version: int | None = None,
    ) -> ArtifactVersion | None:
        session, name = self._where(filename, session_id)
        try:
            meta = await self.client.artifact_meta(
                app_name, user_id, name, session=session, version=version
            )
        except NotFound:
            return None
        return self._version(app_name, user_id, session, name, meta)


__all__ = ["HippocampArtifactService", "HippocampMemoryService"]
