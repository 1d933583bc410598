"""Sessions for the OpenAI Agents SDK (openai-agents >= 0.24) on a
hippocamp server: `HippocampSession` implements the SDK's `Session`
protocol on hippocamp's agent-session routes.

    from agents import Agent, Runner
    from hippocamp.openai_agents import HippocampSession

    session = HippocampSession("chat-7", "hippocamp://127.0.0.1:8765", app="my_agent", user="u42")
    result = await Runner.run(agent, "Where do I live?", session=session)

Items are kept byte for byte (each as the JSON the SDK gave) and their
text is remembered as turns of the session, so the user's memory search
finds what was said. `pop_item` erases the last item and the memory it
became (sending it again is skipped as erased); `clear_session` erases
the session and its memory. The `(app, user)` scope is the one the store
is built for and the token allows.
"""

from __future__ import annotations

import json
from typing import Any

from agents.memory.session_settings import SessionSettings, resolve_session_limit

from .client import JSON, AsyncClient, _Call, scope_path
from .errors import NotFound

# Items one append carries (the server's `sessions.max_items_per_append`).
_MAX_APPEND = 100


class HippocampSession:
    """The SDK's `Session` protocol on one hippocamp agent session."""

    session_settings: SessionSettings | None = None

    def __init__(
        self,
        session_id: str,
        uri: str,
        *,
        app: str,
        user: str,
        token: str | None = None,
        timeout: float = 60.0,
        session_settings: SessionSettings | None = None,
    ) -> None:
        self.session_id = session_id
        self.session_settings = session_settings
        self.app = app
        self.user = user
        self._client = AsyncClient(uri, token, timeout=timeout)

    def _path(self, *tail: str) -> list[str]:
        return [*scope_path(self.app, self.user), "agent-sessions", self.session_id, *tail]

    async def _run(self, call: _Call) -> JSON:
        return await self._client._run(call)

    async def get_items(self, limit: int | None = None) -> list[Any]:
        """The history in order; with `limit` (or the settings' limit), its
        last `limit` items."""
        limit = resolve_session_limit(limit, self.session_settings)
        try:
            if limit is not None:
                page = await self._run(
                    _Call("GET", self._path("items"), params={"last": max(limit, 0)})
                )
                return list(page["items"])
            out: list[Any] = []
            cursor: int | None = 0
            while cursor is not None:
                page = await self._run(_Call("GET", self._path("items"), params={"cursor": cursor}))
                out.extend(page["items"])
                cursor = page.get("next_cursor")
            return out
        except NotFound:
            return []

    async def add_items(self, items: list[Any]) -> None:
        for i in range(0, len(items), _MAX_APPEND):
            chunk = [json.loads(json.dumps(x)) for x in items[i : i + _MAX_APPEND]]
            await self._run(_Call("POST", self._path("items"), json={"items": chunk}))

    async def pop_item(self) -> Any | None:
        r = await self._run(_Call("DELETE", self._path("items", "last")))
        return r["item"]

    async def clear_session(self) -> None:
        confirm = f"{self.app}/{self.user}/{self.session_id}"
        await self._run(_Call("DELETE", self._path(), params={"confirm": confirm}))

    async def close(self) -> None:
        await self._client.aclose()
