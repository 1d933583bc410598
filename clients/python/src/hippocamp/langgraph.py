"""LangGraph's long-term memory store (langgraph >= 1.2) on a hippocamp
server: `HippocampStore(BaseStore)`.

Items live in hippocamp's keyed items, inside the `(app, user)` scope the
store is built for and the token allows: a namespace is a path inside
that scope, never a way out of it. Every operation goes through the
server's governed memory (policy, consent, quotas, redaction, erasure,
audit).

    from hippocamp.langgraph import HippocampStore

    store = HippocampStore("hippocamp://127.0.0.1:8765", app="my_agent", user="u42")
    graph = builder.compile(store=store)

What matches LangGraph's `InMemoryStore` on the same calls: `get`,
`put` (`None` deletes), `list_namespaces` (prefix, suffix, `*`,
`max_depth`, offset/limit) and a `search` without a query (namespace
prefix, filter, offset/limit, items in their namespaces' order of
creation). Differences, on purpose:

- a `search` with a query is hippocamp's ranking (BM25, or hybrid with an
  embedder) over the fields `index` names (default: the whole value);
  an item put with `index=False` is never found by a query;
- a put on an existing key writes a new revision (the history is kept
  and erased with the item);
- `ttl` (minutes) applies when a put creates the item and may only
  shorten the server policy's lifetime; reads do not refresh it;
- a filter value that is an object without operators must equal the
  field's whole object (LangGraph matches it partially);
- `list_namespaces` lists namespaces that hold items (LangGraph's store
  also lists one a `get` touched or whose items were all deleted);
- items made within one millisecond come in id order;
- secret-bearing keys of a value are redacted, as any metadata's are.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Iterable
from typing import Any

from langgraph.store.base import (
    BaseStore,
    GetOp,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
)

from .client import JSON, AsyncClient, Client, _Api, _Call
from .errors import NotFound


def _time(ms: int) -> _dt.datetime:
    return _dt.datetime.fromtimestamp(ms / 1000, tz=_dt.UTC)


def _item(j: JSON) -> Item:
    return Item(
        value=j["value"],
        key=j["key"],
        namespace=tuple(j["namespace"]),
        created_at=_time(j["created_at_ms"]),
        updated_at=_time(j["updated_at_ms"]),
    )


def _search_item(j: JSON) -> SearchItem:
    return SearchItem(
        namespace=tuple(j["namespace"]),
        key=j["key"],
        value=j["value"],
        created_at=_time(j["created_at_ms"]),
        updated_at=_time(j["updated_at_ms"]),
        score=j.get("score"),
    )


class HippocampStore(BaseStore):
    """LangGraph's `BaseStore` on hippocamp's keyed items, for one user."""

    supports_ttl = True

    def __init__(
        self,
        uri: str,
        *,
        app: str,
        user: str,
        token: str | None = None,
        timeout: float = 60.0,
    ) -> None:
        self.app = app
        self.user = user
        self._uri = uri
        self._token = token
        self._timeout = timeout
        self._sync: Client | None = None
        self._async: AsyncClient | None = None

    def _client(self) -> Client:
        if self._sync is None:
            self._sync = Client(self._uri, self._token, timeout=self._timeout)
        return self._sync

    def _aclient(self) -> AsyncClient:
        if self._async is None:
            self._async = AsyncClient(self._uri, self._token, timeout=self._timeout)
        return self._async

    def close(self) -> None:
        if self._sync is not None:
            self._sync.close()

    async def aclose(self) -> None:
        if self._async is not None:
            await self._async.aclose()

    # Each op as one call, and how its reply becomes the op's result.
    def _call(self, op: Op) -> tuple[_Call, Any]:
        a, u = self.app, self.user
        if isinstance(op, GetOp):
            return _Api.get_item(a, u, op.namespace, op.key), _item
        if isinstance(op, PutOp):
            if op.value is None:
                return _Api.delete_item(a, u, op.namespace, op.key), lambda _: None
            index: bool | list[str] | None = None
            if op.index is False:
                index = False
            elif op.index is not None:
                index = list(op.index)
            ttl_ms = None if op.ttl is None else int(op.ttl * 60_000)
            call = _Api.put_item(a, u, op.namespace, op.key, op.value, index=index, ttl_ms=ttl_ms)
            return call, lambda _: None
        if isinstance(op, SearchOp):
            call = _Api.search_items(
                a,
                u,
                op.namespace_prefix,
                filter=op.filter or None,
                query=op.query or None,
                limit=op.limit,
                offset=op.offset,
            )
            return call, lambda j: [_search_item(i) for i in j["items"]]
        if isinstance(op, ListNamespacesOp):
            prefix = suffix = None
            for c in op.match_conditions or ():
                if c.match_type == "prefix" and prefix is None:
                    prefix = list(c.path)
                elif c.match_type == "suffix" and suffix is None:
                    suffix = list(c.path)
                else:
                    raise ValueError(f"one prefix and one suffix condition at most: {c!r}")
            call = _Api.list_namespaces(
                a,
                u,
                prefix=prefix,
                suffix=suffix,
                max_depth=op.max_depth,
                limit=op.limit,
                offset=op.offset,
            )
            return call, lambda j: [tuple(ns) for ns in j["namespaces"]]
        raise ValueError(f"unknown operation: {op!r}")

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        out: list[Result] = []
        for op in ops:
            call, read = self._call(op)
            try:
                out.append(read(self._client()._run(call)))
            except NotFound:
                if not isinstance(op, GetOp):
                    raise
                out.append(None)
        return out

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        out: list[Result] = []
        for op in ops:
            call, read = self._call(op)
            try:
                out.append(read(await self._aclient()._run(call)))
            except NotFound:
                if not isinstance(op, GetOp):
                    raise
                out.append(None)
        return out
