"""HippocampMemoryService under ADK's own Runner, with a scripted model
(ADK's BaseLlm) that calls `load_memory`, and PreloadMemoryTool."""

import asyncio

from conftest import APP
from google.adk.agents import LlmAgent
from google.adk.events import Event
from google.adk.memory.memory_entry import MemoryEntry
from google.adk.models import BaseLlm, LlmResponse
from google.adk.runners import Runner
from google.adk.sessions import InMemorySessionService
from google.adk.tools import load_memory
from google.adk.tools.preload_memory_tool import PreloadMemoryTool
from google.genai import types

from hippocamp import DeliveryTimeout
from hippocamp.adk import HippocampMemoryService


class ScriptedLlm(BaseLlm):
    """Answers from a script and records every request."""

    model: str = "scripted"
    responses: list = []
    requests: list = []

    async def generate_content_async(self, llm_request, stream=False):
        self.requests.append(llm_request)
        yield self.responses.pop(0)


def text_of(request) -> str:
    out = [request.config.system_instruction or ""] if request.config else []
    for c in request.contents:
        for p in c.parts or []:
            if p.text:
                out.append(p.text)
            if p.function_response:
                out.append(str(p.function_response.response))
    return "\n".join(str(x) for x in out)


def event(i: str, author: str, text: str) -> Event:
    return Event(
        id=i,
        author=author,
        invocation_id="inv",
        content=types.Content(
            role="user" if author == "user" else "model", parts=[types.Part(text=text)]
        ),
    )


def test_runner_with_load_memory_and_preload(url, token, user):
    async def go():
        memory = HippocampMemoryService(url, token=token)
        sessions = InMemorySessionService()
        # A past conversation, remembered.
        past = await sessions.create_session(app_name=APP, user_id=user, session_id="past")
        for e in [
            event("p1", "user", "My favourite colour is teal"),
            event("p2", "helper", "Noted, teal it is."),
        ]:
            await sessions.append_event(past, e)
        past = await sessions.get_session(app_name=APP, user_id=user, session_id="past")
        await memory.add_session_to_memory(past)
        # Read-your-writes: searchable as soon as it returns.
        found = await memory.search_memory(app_name=APP, user_id=user, query="colour teal")
        assert found.memories, found
        call = LlmResponse(
            content=types.Content(
                role="model",
                parts=[
                    types.Part.from_function_call(
                        name="load_memory", args={"query": "favourite colour"}
                    )
                ],
            )
        )
        final = LlmResponse(content=types.Content(role="model", parts=[types.Part(text="Teal.")]))
        llm = ScriptedLlm(responses=[call, final], requests=[])
        agent = LlmAgent(name="helper", model=llm, tools=[load_memory, PreloadMemoryTool()])
        runner = Runner(app_name=APP, agent=agent, session_service=sessions, memory_service=memory)
        now = await sessions.create_session(app_name=APP, user_id=user, session_id="now")
        answers = []
        async for ev in runner.run_async(
            user_id=user,
            session_id=now.id,
            new_message=types.Content(
                role="user", parts=[types.Part(text="What is my favourite colour?")]
            ),
        ):
            if ev.content and ev.content.parts and ev.content.parts[0].text:
                answers.append(ev.content.parts[0].text)
        assert answers[-1] == "Teal."
        # PreloadMemoryTool put the remembered turn in the first request;
        # load_memory's result reached the second.
        assert "My favourite colour is teal" in text_of(llm.requests[0])
        assert "My favourite colour is teal" in text_of(llm.requests[1])

    asyncio.run(go())


def test_events_are_idempotent_and_entries_carry_adk_fields(url, token, user):
    async def go():
        memory = HippocampMemoryService(url, token=token)
        events = [event("e1", "user", "I play the cello on Sundays")]
        for _ in range(3):
            await memory.add_events_to_memory(
                app_name=APP, user_id=user, events=events, session_id="s1"
            )
        for _ in range(200):
            r = await memory.search_memory(app_name=APP, user_id=user, query="cello Sundays")
            if r.memories:
                break
            await asyncio.sleep(0.05)
        assert len(r.memories) == 1, r
        m = r.memories[0]
        assert m.id.startswith("mem-") and m.author == "user"
        assert m.content.parts[0].text == "I play the cello on Sundays"
        assert m.timestamp and m.timestamp.endswith("+00:00")
        await memory.add_memory(
            app_name=APP,
            user_id=user,
            memories=[
                MemoryEntry(
                    id="m1", content=types.Content(parts=[types.Part(text="Lives in Porto")])
                )
            ],
        )
        r = await memory.search_memory(app_name=APP, user_id=user, query="Porto")
        assert [x.content.parts[0].text for x in r.memories] == ["Lives in Porto"]
        # Nothing of another user.
        other = await memory.search_memory(app_name=APP, user_id=user + "x", query="cello Porto")
        assert other.memories == []
        # One entry, by the id search gave.
        await memory.delete_memory(app_name=APP, user_id=user, memory_id=m.id)
        r = await memory.search_memory(app_name=APP, user_id=user, query="cello")
        assert r.memories == []
        await memory.delete_memory(app_name=APP, user_id=user)
        assert (
            await memory.search_memory(app_name=APP, user_id=user, query="Porto")
        ).memories == []

    asyncio.run(go())


def test_delivery_is_awaited_and_a_late_one_names_its_jobs(url, token, user):
    async def go():
        memory = HippocampMemoryService(url, token=token)
        # The server of these tests queues ingestion (it has an outbox):
        # the call returns once delivered, so the search right after finds
        # it, every time.
        for i in range(5):
            await memory.add_events_to_memory(
                app_name=APP,
                user_id=user,
                events=[event(f"r{i}", "user", f"I visited lighthouse number {i}")],
                session_id=f"trip{i}",
            )
            r = await memory.search_memory(
                app_name=APP, user_id=user, query=f"lighthouse number {i}"
            )
            assert any(f"number {i}" in m.content.parts[0].text for m in r.memories), r
        # A delivery that does not finish within the wait: the job status
        # is read as pending (the status call alone is replaced, the
        # ingestion is the server's); the error names the job, and the
        # events stay queued and are delivered.
        late = HippocampMemoryService(url, token=token, delivery_timeout=0.2)
        real_job = late.client.job

        async def pending(app, u, job_id):
            return {"id": job_id, "state": "pending"}

        late.client.job = pending
        try:
            await late.add_events_to_memory(
                app_name=APP,
                user_id=user,
                events=[event("late1", "user", "My kayak is bright orange")],
                session_id="late",
            )
            raise AssertionError("no DeliveryTimeout")
        except DeliveryTimeout as e:
            assert len(e.job_ids) == 1 and e.job_ids[0] in str(e)
            job = e.job_ids[0]
        for _ in range(200):
            st = await real_job(APP, user, job)
            if st["state"] == "succeeded":
                break
            await asyncio.sleep(0.05)
        assert st["state"] == "succeeded", st
        # Asynchronous mode returns once queued.
        quick = HippocampMemoryService(url, token=token, wait_for_delivery=False)
        await quick.add_events_to_memory(
            app_name=APP,
            user_id=user,
            events=[event("q1", "user", "I collect vinyl records")],
            session_id="quick",
        )

    asyncio.run(go())
