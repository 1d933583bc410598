"""HippocampArtifactService against ADK's own InMemoryArtifactService on
the same calls. The one difference, by design: hippocamp's versions start
at 1 and are never reused, ADK's in-memory ones start at 0; the
comparison maps them by position."""

import asyncio

import pytest
from conftest import APP
from google.adk.artifacts import InMemoryArtifactService
from google.adk.errors.input_validation_error import InputValidationError
from google.genai import types

from hippocamp.adk import HippocampArtifactService


async def script(svc, user):
    """The same calls on either service; what each returned."""
    out = {}
    v = []
    v.append(
        await svc.save_artifact(
            app_name=APP,
            user_id=user,
            filename="notes.txt",
            session_id="s1",
            artifact=types.Part(text="first"),
        )
    )
    v.append(
        await svc.save_artifact(
            app_name=APP,
            user_id=user,
            filename="notes.txt",
            session_id="s1",
            artifact=types.Part(text="second"),
            custom_metadata={"by": "test"},
        )
    )
    img = types.Part(inline_data=types.Blob(data=b"\x89PNG\r\n", mime_type="image/png"))
    v.append(
        await svc.save_artifact(
            app_name=APP, user_id=user, filename="user:avatar.png", artifact=img
        )
    )
    out["versions_returned"] = v
    out["latest"] = await svc.load_artifact(
        app_name=APP, user_id=user, filename="notes.txt", session_id="s1"
    )
    out["first"] = await svc.load_artifact(
        app_name=APP, user_id=user, filename="notes.txt", session_id="s1", version=v[0]
    )
    out["avatar_from_any_session"] = await svc.load_artifact(
        app_name=APP, user_id=user, filename="user:avatar.png", session_id="other"
    )
    out["missing"] = await svc.load_artifact(
        app_name=APP, user_id=user, filename="nope.txt", session_id="s1"
    )
    out["keys_s1"] = await svc.list_artifact_keys(app_name=APP, user_id=user, session_id="s1")
    out["keys_user"] = await svc.list_artifact_keys(app_name=APP, user_id=user)
    out["versions"] = await svc.list_versions(
        app_name=APP, user_id=user, filename="notes.txt", session_id="s1"
    )
    av = await svc.list_artifact_versions(
        app_name=APP, user_id=user, filename="notes.txt", session_id="s1"
    )
    out["meta"] = [(x.mime_type, x.custom_metadata) for x in av]
    latest = await svc.get_artifact_version(
        app_name=APP, user_id=user, filename="notes.txt", session_id="s1"
    )
    out["latest_meta"] = (latest.mime_type, latest.custom_metadata, latest.canonical_uri)
    out["no_version"] = await svc.get_artifact_version(
        app_name=APP, user_id=user, filename="nope.txt", session_id="s1"
    )
    await svc.delete_artifact(app_name=APP, user_id=user, filename="notes.txt", session_id="s1")
    out["after_delete"] = await svc.list_artifact_keys(app_name=APP, user_id=user, session_id="s1")
    with pytest.raises(InputValidationError):
        await svc.save_artifact(
            app_name=APP, user_id=user, filename="x.txt", artifact=types.Part(text="no session")
        )
    return out


def test_every_method_matches_adks_in_memory_service(url, token, user):
    ours = asyncio.run(script(HippocampArtifactService(url, token=token), user))
    theirs = asyncio.run(script(InMemoryArtifactService(), user))
    # Versions: hippocamp's are 1, 2, 1 where ADK's are 0, 1, 0.
    assert ours["versions_returned"] == [1, 2, 1]
    assert theirs["versions_returned"] == [0, 1, 0]
    assert ours["versions"] == [1, 2] and theirs["versions"] == [0, 1]
    for k in [
        "latest",
        "first",
        "avatar_from_any_session",
        "missing",
        "keys_s1",
        "keys_user",
        "meta",
        "no_version",
        "after_delete",
    ]:
        assert ours[k] == theirs[k], k
    assert ours["latest_meta"][:2] == theirs["latest_meta"][:2]
    # canonical_uri: the version's API v1 URL (ADK's in-memory: memory://).
    assert ours["latest_meta"][2].endswith(
        f"/v1/apps/{APP}/users/{user}/sessions/s1/artifacts/notes.txt?version=2"
    )
