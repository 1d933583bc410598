"""`hippocamp.openai_agents.HippocampSession` against a real server: every
protocol method compared with the SDK's own `SQLiteSession` on the same
calls, and a `Runner` run with the real small model through the SDK's
OpenAI-compatible model class."""

import asyncio
import os

import pytest
from agents import Agent, OpenAIChatCompletionsModel, Runner, SQLiteSession, set_tracing_disabled
from conftest import APP
from openai import AsyncOpenAI

from hippocamp import Client
from hippocamp.openai_agents import HippocampSession

ITEMS = [
    {"role": "user", "content": "I keep bees in Porto"},
    {
        "type": "message",
        "role": "assistant",
        "id": "msg_1",
        "status": "completed",
        "content": [{"type": "output_text", "text": "Bees, noted.", "annotations": []}],
    },
    {"type": "function_call", "name": "lookup", "arguments": '{"q": "bees"}', "call_id": "c1"},
    {"type": "function_call_output", "call_id": "c1", "output": "3 hives"},
    {"role": "user", "content": [{"type": "input_text", "text": "And my cat? 🐈 é"}]},
]


async def _script(session) -> list:
    out = []
    out.append(await session.get_items())
    out.append(await session.pop_item())
    await session.add_items(ITEMS[:2])
    await session.add_items([])
    out.append(await session.get_items())
    await session.add_items(ITEMS[2:])
    out.append(await session.get_items())
    out.append(await session.get_items(limit=2))
    out.append(await session.get_items(limit=0))
    out.append(await session.get_items(limit=50))
    out.append(await session.pop_item())
    out.append(await session.pop_item())
    out.append(await session.get_items())
    await session.add_items([ITEMS[4]])
    out.append(await session.get_items(limit=1))
    await session.clear_session()
    out.append(await session.get_items())
    out.append(await session.pop_item())
    await session.add_items([ITEMS[0]])
    out.append(await session.get_items())
    return out


def test_every_method_matches_sqlite_session(url, token, user, tmp_path):
    async def go() -> None:
        ours = HippocampSession("chat-1", url, app=APP, user=user, token=token)
        theirs = SQLiteSession("chat-1", str(tmp_path / "s.db"))
        a, b = await _script(ours), await _script(theirs)
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            assert x == y, (i, x, y)
        await ours.close()

    asyncio.run(go())


def test_items_are_remembered_and_a_pop_erases_their_memory(url, token, user):
    async def go() -> None:
        session = HippocampSession("chat-2", url, app=APP, user=user, token=token)
        await session.add_items(ITEMS[:2])
        with Client(url, token) as c:
            hits = c.search(APP, user, "bees Porto")["hits"]
            assert sorted(h["content"] for h in hits) == ["Bees, noted.", "I keep bees in Porto"]
            assert await session.pop_item() == ITEMS[1]
            hits = c.search(APP, user, "bees Porto")["hits"]
            assert [h["content"] for h in hits] == ["I keep bees in Porto"]
        await session.close()

    asyncio.run(go())


def test_the_runner_keeps_its_history_in_hippocamp(url, token, user):
    chat_url = os.environ.get("HIPPOCAMP_TEST_CHAT_URL")
    if not chat_url:
        pytest.skip("HIPPOCAMP_TEST_CHAT_URL is not set (scripts/chat-model.sh start)")
    set_tracing_disabled(True)
    model = OpenAIChatCompletionsModel(
        model=os.environ.get("HIPPOCAMP_TEST_CHAT_MODEL", "smollm2-135m"),
        openai_client=AsyncOpenAI(base_url=chat_url, api_key="unused"),
    )
    agent = Agent(name="assistant", instructions="Answer in one short sentence.", model=model)

    async def go() -> None:
        session = HippocampSession("run-1", url, app=APP, user=user, token=token)
        first = await Runner.run(agent, "My name is Ada.", session=session)
        assert isinstance(first.final_output, str)
        await Runner.run(agent, "What is my name?", session=session)
        items = await session.get_items()
        users = [i["content"] for i in items if i.get("role") == "user"]
        assert users == ["My name is Ada.", "What is my name?"]
        assert len(items) == 4, items
        with Client(url, token) as c:
            hits = c.search(APP, user, "name Ada")["hits"]
            assert "My name is Ada." in [h["content"] for h in hits]
        await session.close()

    asyncio.run(go())
