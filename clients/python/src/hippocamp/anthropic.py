"""Anthropic's memory tool (`memory_20250818`, anthropic >= 2.10) on a
hippocamp server: `HippocampMemoryTool` is the SDK's
`BetaAbstractMemoryTool` with every command executed by the server's
`POST …/memory-tool` route on the user's versioned artifacts.

    import anthropic
    from hippocamp.anthropic import HippocampMemoryTool

    memory = HippocampMemoryTool("hippocamp://127.0.0.1:8765", app="my_agent", user="u42")
    runner = anthropic.Anthropic().beta.messages.tool_runner(
        model=..., max_tokens=1024, tools=[memory], messages=[...]
    )

Every `create`, `str_replace` and `insert` writes a new version (history
for free); `delete` erases every version of the file; paths are checked by
the server (no traversal, no percent-encoded escape, no `/memories_other`,
the root cannot be renamed or deleted). A refused command raises the SDK's
`ToolError` with the text the model should read.
"""

from __future__ import annotations

from typing import Any

from anthropic.lib.tools import BetaAbstractMemoryTool, ToolError
from anthropic.types.beta import (
    BetaMemoryTool20250818CreateCommand,
    BetaMemoryTool20250818DeleteCommand,
    BetaMemoryTool20250818InsertCommand,
    BetaMemoryTool20250818RenameCommand,
    BetaMemoryTool20250818StrReplaceCommand,
    BetaMemoryTool20250818ViewCommand,
)

from .client import Client, _Call, scope_path
from .errors import InvalidArgument

# The server words a refused path as `invalid path: <text for the model>`.
_PREFIX = "invalid path: "


class HippocampMemoryTool(BetaAbstractMemoryTool):
    """The memory tool on one user's `/memories` files."""

    def __init__(
        self,
        uri: str,
        *,
        app: str,
        user: str,
        token: str | None = None,
        timeout: float = 60.0,
    ) -> None:
        super().__init__()
        self.app = app
        self.user = user
        self._client = Client(uri, token, timeout=timeout)

    def _run(self, command: Any) -> str:
        body = command.model_dump(exclude_none=True)
        call = _Call("POST", [*scope_path(self.app, self.user), "memory-tool"], json=body)
        try:
            return str(self._client._run(call)["result"])
        except InvalidArgument as e:
            raise ToolError(e.message.removeprefix(_PREFIX)) from e

    def view(self, command: BetaMemoryTool20250818ViewCommand) -> str:
        return self._run(command)

    def create(self, command: BetaMemoryTool20250818CreateCommand) -> str:
        return self._run(command)

    def str_replace(self, command: BetaMemoryTool20250818StrReplaceCommand) -> str:
        return self._run(command)

    def insert(self, command: BetaMemoryTool20250818InsertCommand) -> str:
        return self._run(command)

    def delete(self, command: BetaMemoryTool20250818DeleteCommand) -> str:
        return self._run(command)

    def rename(self, command: BetaMemoryTool20250818RenameCommand) -> str:
        return self._run(command)

    def close(self) -> None:
        self._client.close()
