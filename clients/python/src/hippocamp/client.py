"""A typed client for hippocamp's API v1: `Client` (blocking) and
`AsyncClient` (asyncio), on httpx.

Each operation is described once (`_Call`: method, path segments, query,
body, how to read the reply) and run by either client, so the two cannot
differ. Path segments are percent-encoded exactly once; an artifact name's
`/` separates segments. Error replies raise the typed errors of
`hippocamp.errors`.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, urlsplit

import httpx

from .errors import HippocampError, Unavailable, from_reply

JSON = dict[str, Any]
TOKEN_ENV = "HIPPOCAMP_TOKEN"


def base_url(uri: str) -> str:
    """`http://HOST:PORT` of a `hippocamp://HOST:PORT` (or http) URI."""
    parts = urlsplit(uri)
    if parts.scheme not in ("hippocamp", "http", "https") or not parts.netloc:
        raise ValueError(f"not a hippocamp URI: {uri!r} (expected hippocamp://HOST:PORT)")
    scheme = "https" if parts.scheme == "https" else "http"
    return f"{scheme}://{parts.netloc}"


def _path(*segments: str) -> str:
    return "/" + "/".join(quote(s, safe="") for s in segments)


def scope_path(app: str, user: str | None = None, session: str | None = None) -> list[str]:
    """The path segments of a scope."""
    out = ["v1", "apps", app]
    if user is not None:
        out += ["users", user]
        if session is not None:
            out += ["sessions", session]
    elif session is not None:
        raise ValueError("a session scope needs its user")
    return out


def namespace_id(labels: Iterable[str]) -> str:
    """A keyed item's namespace as the one id the server takes: the labels
    joined with `.`, each with `%`, `.`, `/`, `\\` and an edge space as
    `%XX` (the server refuses any other spelling)."""
    out = []
    for label in labels:
        last = len(label) - 1
        enc = ""
        for j, c in enumerate(label):
            if c in "%./\\" or (c == " " and j in (0, last)):
                enc += f"%{ord(c):02X}"
            else:
                enc += c
        out.append(enc)
    return ".".join(out)


def artifact_url(
    base: str, app: str, user: str, session: str | None, name: str, version: int
) -> str:
    """The API v1 URL of an artifact version: the `canonical_uri` ADK
    sees and the URI of the same version as an MCP resource."""
    segs = [*scope_path(app, user, session), "artifacts", *name.split("/")]
    return f"{base}{_path(*segs)}?version={version}"


@dataclass
class _Call:
    method: str
    segments: list[str]
    params: dict[str, Any] = field(default_factory=dict)
    json: Any = None
    content: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    # How to read a successful reply; `None` returns the raw response.
    read: Callable[[httpx.Response], Any] | None = lambda r: r.json()


def _check(r: httpx.Response) -> None:
    if r.is_success:
        return
    try:
        body = r.json()
    except (ValueError, json.JSONDecodeError):
        body = None
    raise from_reply(r.status_code, body)


def _artifact_headers(mime_type: str, metadata: Mapping[str, Any] | None) -> dict[str, str]:
    h = {"content-type": mime_type}
    if metadata:
        h["x-hippocamp-metadata"] = json.dumps(dict(metadata), separators=(",", ":"))
    return h


class _Api:
    """The operations, as calls (shared by both clients)."""

    # Memory.
    @staticmethod
    def add_entry(
        app: str,
        user: str,
        content: str,
        metadata: Mapping[str, Any] | None = None,
        idempotency_key: str | None = None,
        fact_key: str | None = None,
    ) -> _Call:
        """`fact_key` (`user.home_city`): a newer entry with the same key
        supersedes this one in search."""
        body: JSON = {"content": content, "metadata": dict(metadata or {})}
        if idempotency_key is not None:
            body["idempotency_key"] = idempotency_key
        if fact_key is not None:
            body["fact_key"] = fact_key
        return _Call("POST", [*scope_path(app, user), "memory", "entries"], json=body)

    @staticmethod
    def get_entry(app: str, user: str, entry_id: str) -> _Call:
        return _Call("GET", [*scope_path(app, user), "memory", "entries", entry_id])

    @staticmethod
    def delete_entry(app: str, user: str, entry_id: str) -> _Call:
        return _Call("DELETE", [*scope_path(app, user), "memory", "entries", entry_id])

    @staticmethod
    def search(
        app: str,
        user: str,
        query: str,
        *,
        limit: int | None = None,
        filter: Mapping[str, Any] | None = None,
        mode: str | None = None,
        max_bytes: int | None = None,
        explain: bool = False,
        context: tuple[int, int] | None = None,
        reference_time_ms: int | None = None,
        include_superseded: bool = False,
        include_merged: bool = False,
        origins: list[str] | None = None,
    ) -> _Call:
        """`context=(before, after)` returns each hit's neighbouring turns.

        A hit of an entry long enough to be indexed as passages carries
        `passage: {start, end}`, the byte range of its content that
        matched best. Only current entries are returned unless
        `include_superseded` / `include_merged`; `origins` (`turn`,
        `note`, `file`, `fact`) keeps those origins only. Relative times
        in the query are read against `reference_time_ms` (default now).
        """
        body: JSON = {"query": query}
        if limit is not None:
            body["limit"] = limit
        if filter is not None:
            body["filter"] = dict(filter)
        if mode is not None:
            body["mode"] = mode
        if max_bytes is not None:
            body["max_bytes"] = max_bytes
        if explain:
            body["explain"] = True
        if context is not None:
            body["context"] = {"before": context[0], "after": context[1]}
        if reference_time_ms is not None:
            body["reference_time_ms"] = reference_time_ms
        if include_superseded:
            body["include_superseded"] = True
        if include_merged:
            body["include_merged"] = True
        if origins:
            body["origins"] = list(origins)
        return _Call("POST", [*scope_path(app, user), "memory", "search"], json=body)

    @staticmethod
    def preload(
        app: str,
        user: str,
        query: str,
        *,
        limit: int | None = None,
        filter: Mapping[str, Any] | None = None,
        mode: str | None = None,
        max_hit_bytes: int | None = None,
        max_total_bytes: int | None = None,
    ) -> _Call:
        """The framed memory block the agent runner preloads for `query`:
        `{"block", "nonce", "entries"}`, `block` null when nothing was
        found. Put it in a user message, never the system instruction."""
        body: JSON = {"query": query}
        for k, v in (
            ("limit", limit),
            ("mode", mode),
            ("max_hit_bytes", max_hit_bytes),
            ("max_total_bytes", max_total_bytes),
        ):
            if v is not None:
                body[k] = v
        if filter is not None:
            body["filter"] = dict(filter)
        return _Call("POST", [*scope_path(app, user), "memory", "preload"], json=body)

    @staticmethod
    def lineage(app: str, user: str, entry_id: str) -> _Call:
        return _Call("GET", [*scope_path(app, user), "memory", "entries", entry_id, "lineage"])

    # Keyed items.
    @staticmethod
    def put_item(
        app: str,
        user: str,
        namespace: Iterable[str],
        key: str,
        value: Mapping[str, Any],
        *,
        index: bool | list[str] | None = None,
        ttl_ms: int | None = None,
    ) -> _Call:
        """Creates the item (201) or writes a new revision (200)."""
        body: JSON = {"value": dict(value)}
        if index is not None:
            body["index"] = index
        if ttl_ms is not None:
            body["ttl_ms"] = ttl_ms
        return _Call(
            "PUT",
            [*scope_path(app, user), "memory", "items", namespace_id(namespace), key],
            json=body,
        )

    @staticmethod
    def get_item(app: str, user: str, namespace: Iterable[str], key: str) -> _Call:
        return _Call(
            "GET", [*scope_path(app, user), "memory", "items", namespace_id(namespace), key]
        )

    @staticmethod
    def delete_item(app: str, user: str, namespace: Iterable[str], key: str) -> _Call:
        return _Call(
            "DELETE", [*scope_path(app, user), "memory", "items", namespace_id(namespace), key]
        )

    @staticmethod
    def search_items(
        app: str,
        user: str,
        namespace_prefix: Iterable[str] = (),
        *,
        filter: Mapping[str, Any] | None = None,
        query: str | None = None,
        limit: int | None = None,
        offset: int | None = None,
    ) -> _Call:
        body: JSON = {"namespace_prefix": list(namespace_prefix)}
        for k, v in (("filter", filter), ("query", query), ("limit", limit), ("offset", offset)):
            if v is not None:
                body[k] = dict(v) if isinstance(v, Mapping) else v
        return _Call("POST", [*scope_path(app, user), "memory", "items", "search"], json=body)

    @staticmethod
    def list_namespaces(
        app: str,
        user: str,
        *,
        prefix: Iterable[str] | None = None,
        suffix: Iterable[str] | None = None,
        max_depth: int | None = None,
        limit: int | None = None,
        offset: int | None = None,
    ) -> _Call:
        body: JSON = {}
        for k, v in (("prefix", prefix), ("suffix", suffix)):
            if v is not None:
                body[k] = list(v)
        for k, n in (("max_depth", max_depth), ("limit", limit), ("offset", offset)):
            if n is not None:
                body[k] = n
        return _Call("POST", [*scope_path(app, user), "memory", "items", "namespaces"], json=body)

    # Consolidation runs.
    @staticmethod
    def consolidate(
        app: str,
        user: str,
        *,
        mode: str = "dedupe",
        review: bool = False,
        origins: list[str] | None = None,
        wait: bool = True,
    ) -> _Call:
        """Starts a run; with `wait` (default) answers with the finished run,
        else with `{"run": {"id", "state"}}` at once."""
        body: JSON = {"mode": mode, "apply": "review" if review else "auto"}
        if origins:
            body["origins"] = list(origins)
        return _Call(
            "POST",
            [*scope_path(app, user), "memory", "consolidations"],
            params={"wait": "true"} if wait else {},
            json=body,
        )

    @staticmethod
    def consolidations(app: str, user: str) -> _Call:
        return _Call("GET", [*scope_path(app, user), "memory", "consolidations"])

    @staticmethod
    def consolidation(app: str, user: str, run_id: str) -> _Call:
        return _Call("GET", [*scope_path(app, user), "memory", "consolidations", run_id])

    @staticmethod
    def apply_consolidation(app: str, user: str, run_id: str) -> _Call:
        return _Call(
            "POST", [*scope_path(app, user), "memory", "consolidations", run_id, "apply"]
        )

    @staticmethod
    def revert_consolidation(app: str, user: str, run_id: str) -> _Call:
        return _Call(
            "POST", [*scope_path(app, user), "memory", "consolidations", run_id, "revert"]
        )

    @staticmethod
    def add_events(app: str, user: str, session: str, events: list[JSON]) -> _Call:
        return _Call(
            "POST",
            [*scope_path(app, user), "memory", "sessions", session, "events"],
            json={"events": events},
        )

    @staticmethod
    def ingest(app: str, user: str, session: str, events: list[JSON]) -> _Call:
        return _Call(
            "POST",
            [*scope_path(app, user), "memory", "sessions", session, "ingest"],
            json={"events": events},
        )

    @staticmethod
    def job(app: str, user: str, job_id: str) -> _Call:
        return _Call("GET", [*scope_path(app, user), "memory", "jobs", job_id])

    @staticmethod
    def cancel_job(app: str, user: str, job_id: str) -> _Call:
        return _Call("POST", [*scope_path(app, user), "memory", "jobs", job_id, "cancel"])

    @staticmethod
    def artifact_capabilities() -> _Call:
        return _Call("GET", ["v1", "artifacts", "capabilities"])

    @staticmethod
    def outbox_stats() -> _Call:
        return _Call("GET", ["v1", "outbox", "stats"])

    @staticmethod
    def outbox_prune(limit: int | None = None) -> _Call:
        return _Call(
            "POST", ["v1", "outbox", "prune"], params={} if limit is None else {"limit": limit}
        )

    @staticmethod
    def head_artifact(
        app: str, user: str | None, session: str | None, name: str, version: int | None
    ) -> _Call:
        params = {} if version is None else {"version": version}
        return _Call(
            "HEAD",
            [*scope_path(app, user, session), "artifacts", *name.split("/")],
            params=params,
            read=lambda r: dict(r.headers),
        )

    # Whole-scope erasures name the scope they erase (`?confirm=`): the
    # server refuses a DELETE whose confirmation is not that exact scope.
    @staticmethod
    def delete_session(app: str, user: str, session: str) -> _Call:
        return _Call(
            "DELETE",
            [*scope_path(app, user), "memory", "sessions", session],
            params={"confirm": f"{app}/{user}/{session}"},
        )

    @staticmethod
    def delete_user(app: str, user: str) -> _Call:
        return _Call(
            "DELETE",
            [*scope_path(app, user), "memory"],
            params={"confirm": f"{app}/{user}"},
        )

    @staticmethod
    def epoch(app: str, user: str) -> _Call:
        return _Call("GET", [*scope_path(app, user), "memory", "epoch"])

    @staticmethod
    def memory_capabilities() -> _Call:
        return _Call("GET", ["v1", "memory", "capabilities"])

    # Artifacts (user is None: the app scope; session: a session scope).
    @staticmethod
    def put_artifact(
        app: str,
        user: str | None,
        session: str | None,
        name: str,
        data: Any,
        mime_type: str,
        metadata: Mapping[str, Any] | None,
    ) -> _Call:
        return _Call(
            "PUT",
            [*scope_path(app, user, session), "artifacts", *name.split("/")],
            content=data,
            headers=_artifact_headers(mime_type, metadata),
        )

    @staticmethod
    def get_artifact(
        app: str, user: str | None, session: str | None, name: str, version: int | None
    ) -> _Call:
        params = {} if version is None else {"version": version}
        return _Call(
            "GET",
            [*scope_path(app, user, session), "artifacts", *name.split("/")],
            params=params,
            read=None,
        )

    @staticmethod
    def artifact_meta(
        app: str, user: str | None, session: str | None, name: str, version: int | None
    ) -> _Call:
        params = {} if version is None else {"version": version}
        return _Call(
            "GET",
            [*scope_path(app, user, session), "artifact-meta", *name.split("/")],
            params=params,
        )

    @staticmethod
    def list_names(
        app: str, user: str | None, session: str | None, cursor: str | None, limit: int | None
    ) -> _Call:
        params = {k: v for k, v in (("cursor", cursor), ("limit", limit)) if v is not None}
        return _Call("GET", [*scope_path(app, user, session), "artifacts"], params=params)

    @staticmethod
    def list_versions(
        app: str,
        user: str | None,
        session: str | None,
        name: str,
        cursor: int | None,
        limit: int | None,
    ) -> _Call:
        params = {k: v for k, v in (("cursor", cursor), ("limit", limit)) if v is not None}
        return _Call(
            "GET",
            [*scope_path(app, user, session), "artifact-versions", *name.split("/")],
            params=params,
        )

    @staticmethod
    def delete_artifact(
        app: str, user: str | None, session: str | None, name: str, version: int | None
    ) -> _Call:
        params: dict[str, Any] = {"all": "true"} if version is None else {"version": version}
        return _Call(
            "DELETE",
            [*scope_path(app, user, session), "artifacts", *name.split("/")],
            params=params,
        )


def _token(token: str | None) -> str:
    t = token if token is not None else os.environ.get(TOKEN_ENV)
    if not t:
        raise ValueError(f"no token: pass token= or set {TOKEN_ENV}")
    return t


class AsyncClient:
    """The API v1 over asyncio."""

    def __init__(
        self,
        base: str,
        token: str | None = None,
        *,
        timeout: float = 60.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.base = base_url(base) if "://" in base else f"http://{base}"
        self._http = httpx.AsyncClient(
            base_url=self.base,
            timeout=timeout,
            transport=transport,
            headers={"authorization": f"Bearer {_token(token)}"},
        )

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    async def _run(self, c: _Call) -> Any:
        try:
            r = await self._http.request(
                c.method,
                _path(*c.segments),
                params=c.params,
                json=c.json,
                content=c.content,
                headers=c.headers,
            )
        except httpx.HTTPError as e:
            raise Unavailable(f"the server did not answer: {e}", code="unavailable") from e
        _check(r)
        return r if c.read is None else c.read(r)

    async def add_entry(self, app: str, user: str, content: str, **kw: Any) -> JSON:
        return await self._run(_Api.add_entry(app, user, content, **kw))

    async def get_entry(self, app: str, user: str, entry_id: str) -> JSON:
        return await self._run(_Api.get_entry(app, user, entry_id))

    async def delete_entry(self, app: str, user: str, entry_id: str) -> JSON:
        return await self._run(_Api.delete_entry(app, user, entry_id))

    async def search(self, app: str, user: str, query: str, **kw: Any) -> JSON:
        return await self._run(_Api.search(app, user, query, **kw))

    async def preload(self, app: str, user: str, query: str, **kw: Any) -> JSON:
        return await self._run(_Api.preload(app, user, query, **kw))

    async def lineage(self, app: str, user: str, entry_id: str) -> JSON:
        return await self._run(_Api.lineage(app, user, entry_id))

    async def consolidate(self, app: str, user: str, **kw: Any) -> JSON:
        return await self._run(_Api.consolidate(app, user, **kw))

    async def put_item(self, *args: Any, **kw: Any) -> JSON:
        return await self._run(_Api.put_item(*args, **kw))

    async def get_item(self, *args: Any, **kw: Any) -> JSON:
        return await self._run(_Api.get_item(*args, **kw))

    async def delete_item(self, *args: Any, **kw: Any) -> JSON:
        return await self._run(_Api.delete_item(*args, **kw))

    async def search_items(self, *args: Any, **kw: Any) -> JSON:
        return await self._run(_Api.search_items(*args, **kw))

    async def list_namespaces(self, *args: Any, **kw: Any) -> JSON:
        return await self._run(_Api.list_namespaces(*args, **kw))

    async def consolidations(self, app: str, user: str) -> JSON:
        return await self._run(_Api.consolidations(app, user))

    async def consolidation(self, app: str, user: str, run_id: str) -> JSON:
        return await self._run(_Api.consolidation(app, user, run_id))

    async def apply_consolidation(self, app: str, user: str, run_id: str) -> JSON:
        return await self._run(_Api.apply_consolidation(app, user, run_id))

    async def revert_consolidation(self, app: str, user: str, run_id: str) -> JSON:
        return await self._run(_Api.revert_consolidation(app, user, run_id))

    async def add_events(self, app: str, user: str, session: str, events: list[JSON]) -> JSON:
        return await self._run(_Api.add_events(app, user, session, events))

    async def ingest(self, app: str, user: str, session: str, events: list[JSON]) -> JSON:
        return await self._run(_Api.ingest(app, user, session, events))

    async def job(self, app: str, user: str, job_id: str) -> JSON:
        return await self._run(_Api.job(app, user, job_id))

    async def cancel_job(self, app: str, user: str, job_id: str) -> JSON:
        return await self._run(_Api.cancel_job(app, user, job_id))

    async def artifact_capabilities(self) -> JSON:
        return await self._run(_Api.artifact_capabilities())

    async def outbox_stats(self) -> JSON:
        return await self._run(_Api.outbox_stats())

    async def outbox_prune(self, limit: int | None = None) -> JSON:
        return await self._run(_Api.outbox_prune(limit))

    async def head_artifact(
        self,
        app: str,
        user: str | None,
        name: str,
        *,
        session: str | None = None,
        version: int | None = None,
    ) -> JSON:
        """The version's headers (size, type, digest as ETag, version)."""
        return await self._run(_Api.head_artifact(app, user, session, name, version))

    async def delete_session(self, app: str, user: str, session: str) -> JSON:
        return await self._run(_Api.delete_session(app, user, session))

    async def delete_user(self, app: str, user: str) -> JSON:
        return await self._run(_Api.delete_user(app, user))

    async def epoch(self, app: str, user: str) -> JSON:
        return await self._run(_Api.epoch(app, user))

    async def memory_capabilities(self) -> JSON:
        return await self._run(_Api.memory_capabilities())

    async def put_artifact(
        self,
        app: str,
        user: str | None,
        name: str,
        data: bytes | AsyncIterator[bytes],
        *,
        session: str | None = None,
        mime_type: str = "application/octet-stream",
        metadata: Mapping[str, Any] | None = None,
    ) -> JSON:
        """Stores `data` (bytes, or an async iterator of chunks, streamed)
        as the next version."""
        return await self._run(
            _Api.put_artifact(app, user, session, name, data, mime_type, metadata)
        )

    async def get_artifact(
        self,
        app: str,
        user: str | None,
        name: str,
        *,
        session: str | None = None,
        version: int | None = None,
    ) -> bytes:
        r = await self._run(_Api.get_artifact(app, user, session, name, version))
        return r.content

    async def stream_artifact(
        self,
        app: str,
        user: str | None,
        name: str,
        *,
        session: str | None = None,
        version: int | None = None,
    ) -> AsyncIterator[bytes]:
        """The version's bytes as they arrive (verified by the server)."""
        c = _Api.get_artifact(app, user, session, name, version)
        async with self._http.stream(c.method, _path(*c.segments), params=c.params) as r:
            if not r.is_success:
                await r.aread()
                _check(r)
            async for chunk in r.aiter_bytes():
                yield chunk

    async def artifact_meta(
        self,
        app: str,
        user: str | None,
        name: str,
        *,
        session: str | None = None,
        version: int | None = None,
    ) -> JSON:
        return await self._run(_Api.artifact_meta(app, user, session, name, version))

    async def list_names(
        self,
        app: str,
        user: str | None,
        *,
        session: str | None = None,
        cursor: str | None = None,
        limit: int | None = None,
    ) -> JSON:
        return await self._run(_Api.list_names(app, user, session, cursor, limit))

    async def all_names(
        self, app: str, user: str | None, *, session: str | None = None
    ) -> list[str]:
        out: list[str] = []
        cursor = None
        while True:
            page = await self.list_names(app, user, session=session, cursor=cursor)
            out += page["items"]
            cursor = page.get("next_cursor")
            if cursor is None:
                return out

    async def list_versions(
        self,
        app: str,
        user: str | None,
        name: str,
        *,
        session: str | None = None,
        cursor: int | None = None,
        limit: int | None = None,
    ) -> JSON:
        return await self._run(_Api.list_versions(app, user, session, name, cursor, limit))

    async def all_versions(
        self, app: str, user: str | None, name: str, *, session: str | None = None
    ) -> list[JSON]:
        out: list[JSON] = []
        cursor = None
        while True:
            page = await self.list_versions(app, user, name, session=session, cursor=cursor)
            out += page["items"]
            cursor = page.get("next_cursor")
            if cursor is None:
                return out

    async def delete_artifact(
        self,
        app: str,
        user: str | None,
        name: str,
        *,
        session: str | None = None,
        version: int | None = None,
    ) -> JSON:
        """Deletes one version, or every version when `version` is None."""
        return await self._run(_Api.delete_artifact(app, user, session, name, version))


class Client:
    """The API v1, blocking."""

    def __init__(
        self,
        base: str,
        token: str | None = None,
        *,
        timeout: float = 60.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.base = base_url(base) if "://" in base else f"http://{base}"
        self._http = httpx.Client(
            base_url=self.base,
            timeout=timeout,
            transport=transport,
            headers={"authorization": f"Bearer {_token(token)}"},
        )

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def _run(self, c: _Call) -> Any:
        try:
            r = self._http.request(
                c.method,
                _path(*c.segments),
                params=c.params,
                json=c.json,
                content=c.content,
                headers=c.headers,
            )
        except httpx.HTTPError as e:
            raise Unavailable(f"the server did not answer: {e}", code="unavailable") from e
        _check(r)
        return r if c.read is None else c.read(r)

    def add_entry(self, app: str, user: str, content: str, **kw: Any) -> JSON:
        return self._run(_Api.add_entry(app, user, content, **kw))

    def get_entry(self, app: str, user: str, entry_id: str) -> JSON:
        return self._run(_Api.get_entry(app, user, entry_id))

    def delete_entry(self, app: str, user: str, entry_id: str) -> JSON:
        return self._run(_Api.delete_entry(app, user, entry_id))

    def search(self, app: str, user: str, query: str, **kw: Any) -> JSON:
        return self._run(_Api.search(app, user, query, **kw))

    def preload(self, app: str, user: str, query: str, **kw: Any) -> JSON:
        return self._run(_Api.preload(app, user, query, **kw))

    def lineage(self, app: str, user: str, entry_id: str) -> JSON:
        return self._run(_Api.lineage(app, user, entry_id))

    def consolidate(self, app: str, user: str, **kw: Any) -> JSON:
        return self._run(_Api.consolidate(app, user, **kw))

    def put_item(self, *args: Any, **kw: Any) -> JSON:
        return self._run(_Api.put_item(*args, **kw))

    def get_item(self, *args: Any, **kw: Any) -> JSON:
        return self._run(_Api.get_item(*args, **kw))

    def delete_item(self, *args: Any, **kw: Any) -> JSON:
        return self._run(_Api.delete_item(*args, **kw))

    def search_items(self, *args: Any, **kw: Any) -> JSON:
        return self._run(_Api.search_items(*args, **kw))

    def list_namespaces(self, *args: Any, **kw: Any) -> JSON:
        return self._run(_Api.list_namespaces(*args, **kw))

    def consolidations(self, app: str, user: str) -> JSON:
        return self._run(_Api.consolidations(app, user))

    def consolidation(self, app: str, user: str, run_id: str) -> JSON:
        return self._run(_Api.consolidation(app, user, run_id))

    def apply_consolidation(self, app: str, user: str, run_id: str) -> JSON:
        return self._run(_Api.apply_consolidation(app, user, run_id))

    def revert_consolidation(self, app: str, user: str, run_id: str) -> JSON:
        return self._run(_Api.revert_consolidation(app, user, run_id))

    def add_events(self, app: str, user: str, session: str, events: list[JSON]) -> JSON:
        return self._run(_Api.add_events(app, user, session, events))

    def ingest(self, app: str, user: str, session: str, events: list[JSON]) -> JSON:
        return self._run(_Api.ingest(app, user, session, events))

    def job(self, app: str, user: str, job_id: str) -> JSON:
        return self._run(_Api.job(app, user, job_id))

    def cancel_job(self, app: str, user: str, job_id: str) -> JSON:
        return self._run(_Api.cancel_job(app, user, job_id))

    def artifact_capabilities(self) -> JSON:
        return self._run(_Api.artifact_capabilities())

    def outbox_stats(self) -> JSON:
        return self._run(_Api.outbox_stats())

    def outbox_prune(self, limit: int | None = None) -> JSON:
        return self._run(_Api.outbox_prune(limit))

    def head_artifact(
        self,
        app: str,
        user: str | None,
        name: str,
        *,
        session: str | None = None,
        version: int | None = None,
    ) -> JSON:
        """The version's headers (size, type, digest as ETag, version)."""
        return self._run(_Api.head_artifact(app, user, session, name, version))

    def delete_session(self, app: str, user: str, session: str) -> JSON:
        return self._run(_Api.delete_session(app, user, session))

    def delete_user(self, app: str, user: str) -> JSON:
        return self._run(_Api.delete_user(app, user))

    def epoch(self, app: str, user: str) -> JSON:
        return self._run(_Api.epoch(app, user))

    def memory_capabilities(self) -> JSON:
        return self._run(_Api.memory_capabilities())

    def put_artifact(
        self,
        app: str,
        user: str | None,
        name: str,
        data: bytes | Iterable[bytes],
        *,
        session: str | None = None,
        mime_type: str = "application/octet-stream",
        metadata: Mapping[str, Any] | None = None,
    ) -> JSON:
        """Stores `data` (bytes, or an iterable of chunks, streamed) as the
        next version."""
        return self._run(_Api.put_artifact(app, user, session, name, data, mime_type, metadata))

    def get_artifact(
        self,
        app: str,
        user: str | None,
        name: str,
        *,
        session: str | None = None,
        version: int | None = None,
    ) -> bytes:
        return self._run(_Api.get_artifact(app, user, session, name, version)).content

    def stream_artifact(
        self,
        app: str,
        user: str | None,
        name: str,
        *,
        session: str | None = None,
        version: int | None = None,
    ) -> Iterator[bytes]:
        """The version's bytes as they arrive (verified by the server)."""
        c = _Api.get_artifact(app, user, session, name, version)
        with self._http.stream(c.method, _path(*c.segments), params=c.params) as r:
            if not r.is_success:
                r.read()
                _check(r)
            yield from r.iter_bytes()

    def artifact_meta(
        self,
        app: str,
        user: str | None,
        name: str,
        *,
        session: str | None = None,
        version: int | None = None,
    ) -> JSON:
        return self._run(_Api.artifact_meta(app, user, session, name, version))

    def list_names(
        self,
        app: str,
        user: str | None,
        *,
        session: str | None = None,
        cursor: str | None = None,
        limit: int | None = None,
    ) -> JSON:
        return self._run(_Api.list_names(app, user, session, cursor, limit))

    def list_versions(
        self,
        app: str,
        user: str | None,
        name: str,
        *,
        session: str | None = None,
        cursor: int | None = None,
        limit: int | None = None,
    ) -> JSON:
        return self._run(_Api.list_versions(app, user, session, name, cursor, limit))

    def delete_artifact(
        self,
        app: str,
        user: str | None,
        name: str,
        *,
        session: str | None = None,
        version: int | None = None,
    ) -> JSON:
        """Deletes one version, or every version when `version` is None."""
        return self._run(_Api.delete_artifact(app, user, session, name, version))


__all__ = ["AsyncClient", "Client", "HippocampError", "artifact_url", "base_url"]
