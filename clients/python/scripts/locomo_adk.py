"""LoCoMo through the ADK interface: `add_session_to_memory` per session,
`search_memory` per question, R@10 over categories 1-4, next to the R@10
of `hippocamp eval locomo` on the same data.

Usage:
  hippocamp eval locomo-export ../shared/data/locomo/locomo-dev.json > export.json
  hippocamp eval locomo --json ../shared/data/locomo/locomo-dev.json > eval.json
  HIPPOCAMP_TOKEN=... python locomo_adk.py hippocamp://127.0.0.1:8765 export.json eval.json
The token must grant app `locomo`. Prints one JSON line.
"""

import asyncio
import json
import sys

from google.adk.events import Event
from google.adk.sessions import Session
from google.genai import types

from hippocamp.adk import HippocampMemoryService


def adk_event(e: dict) -> Event:
    return Event(
        id=e["id"],
        author=e["author"],
        invocation_id="locomo",
        timestamp=e["timestamp_ms"] / 1000,
        content=types.Content(
            role="user", parts=[types.Part(text=e["content"]["parts"][0]["text"])]
        ),
        custom_metadata=e.get("metadata"),
    )


async def main(uri: str, export_path: str, eval_path: str) -> None:
    data = json.load(open(export_path))
    memory = HippocampMemoryService(uri, search_limit=10)
    for s in data["samples"]:
        for sess in s["sessions"]:
            session = Session(
                id=sess["id"],
                app_name=s["app"],
                user_id=s["user"],
                events=[adk_event(e) for e in sess["events"]],
            )
            await memory.add_session_to_memory(session)
    # Queued ingestion: wait until every conversation's last turn is found.
    for s in data["samples"]:
        last = s["sessions"][-1]["events"][-1]["content"]["parts"][0]["text"]
        for _ in range(600):
            r = await memory.search_memory(app_name=s["app"], user_id=s["user"], query=last)
            if any(m.content.parts[0].text == last for m in r.memories):
                break
            await asyncio.sleep(0.05)
    recalls = []
    for s in data["samples"]:
        for q in s["questions"]:
            if not 1 <= q["category"] <= 4:
                continue
            r = await memory.search_memory(app_name=s["app"], user_id=s["user"], query=q["text"])
            ranked = [m.custom_metadata.get("dia_id") for m in r.memories][:10]
            found = sum(1 for e in q["evidence"] if e in ranked)
            recalls.append(found / len(q["evidence"]))
    adk_r10 = sum(recalls) / len(recalls)
    eval_r10 = json.load(open(eval_path))["recall_at_10"]
    print(
        json.dumps(
            {"questions": len(recalls), "adk_recall_at_10": adk_r10, "eval_recall_at_10": eval_r10}
        )
    )


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:4]))
