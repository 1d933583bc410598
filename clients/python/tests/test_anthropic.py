"""`hippocamp.anthropic.HippocampMemoryTool` driven through the SDK's own
entry point (`call`, with the tool's input as the API sends it) and its
command types, against a real server; plus a hostile-path table."""

import pytest
from anthropic.lib.tools import ToolError
from anthropic.types.beta import BetaMemoryTool20250818ViewCommand
from conftest import APP

from hippocamp import Client
from hippocamp.anthropic import HippocampMemoryTool


def test_every_command_through_the_sdk(url, token, user):
    tool = HippocampMemoryTool(url, app=APP, user=user, token=token)
    assert tool.to_dict()["type"] == "memory_20250818"
    assert tool.call({"command": "view", "path": "/memories"}).startswith(
        "Here're the files and directories up to 2 levels deep in /memories"
    )
    created = tool.call(
        {"command": "create", "path": "/memories/prefs.md", "file_text": "likes tea\n"}
    )
    assert created == "File created successfully at: /memories/prefs.md"
    edited = tool.call(
        {
            "command": "str_replace",
            "path": "/memories/prefs.md",
            "old_str": "tea",
            "new_str": "coffee",
        }
    )
    assert "     1\tlikes coffee" in edited
    assert (
        tool.call(
            {
                "command": "insert",
                "path": "/memories/prefs.md",
                "insert_line": 1,
                "insert_text": "lives in Porto",
            }
        )
        == "The file /memories/prefs.md has been edited."
    )
    shown = tool.view(BetaMemoryTool20250818ViewCommand(command="view", path="/memories/prefs.md"))
    assert shown == (
        "Here's the content of /memories/prefs.md with line numbers:\n"
        "     1\tlikes coffee\n     2\tlives in Porto\n     3\t"
    )
    # Every edit is a version of the artifact.
    with Client(url, token) as c:
        versions = c.list_versions(APP, user, ".memories/prefs.md")["items"]
        assert [v["version"] for v in versions] == [1, 2, 3]
    renamed = tool.call(
        {"command": "rename", "old_path": "/memories/prefs.md", "new_path": "/memories/me.md"}
    )
    assert renamed == "Successfully renamed /memories/prefs.md to /memories/me.md"
    with Client(url, token) as c:
        assert c.artifact_meta(APP, user, ".memories/me.md")["version"] == 1
    assert tool.call({"command": "delete", "path": "/memories/me.md"}) == (
        "Successfully deleted /memories/me.md"
    )
    with pytest.raises(ToolError) as e:
        tool.call({"command": "view", "path": "/memories/me.md"})
    assert str(e.value) == "The path /memories/me.md does not exist. Please provide a valid path."
    tool.close()


@pytest.mark.parametrize(
    "path",
    [
        "/memories/../etc/passwd",
        "/memories_other/x.md",
        "/memories/%2e%2e/x.md",
        "/memories/a\\b.md",
        "/etc/passwd",
        "/memories//x.md",
    ],
)
def test_hostile_paths_are_refused(url, token, user, path):
    tool = HippocampMemoryTool(url, app=APP, user=user, token=token)
    with pytest.raises(ToolError) as e:
        tool.call({"command": "create", "path": path, "file_text": "x"})
    assert "/tmp" not in str(e.value) and ".memories" not in str(e.value)
    with pytest.raises(ToolError):
        tool.call({"command": "delete", "path": "/memories"})
    tool.close()
