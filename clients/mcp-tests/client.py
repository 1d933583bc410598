"""Runs a plan of MCP steps with the official Python SDK (`mcp` 2.3.0) and
prints one JSON result per step, for hippocamp's Rust integration tests.

Usage: python client.py http URL TOKEN PLAN_JSON
       python client.py stdio COMMAND_JSON PLAN_JSON
A plan is a list of steps: ["tools"], ["call", NAME, ARGS], ["resources"],
["read", URI]. A step that raises records {"error": "..."}.
"""

import json
import sys

import anyio
import httpx2
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client


def dump(x):
    return x.model_dump(mode="json", by_alias=True, exclude_none=True)


async def run_plan(client, plan):
    out = []
    for step in plan:
        try:
            if step[0] == "tools":
                r = await client.list_tools()
                out.append({"tools": [dump(t) for t in r.tools]})
            elif step[0] == "call":
                r = await client.call_tool(step[1], step[2])
                out.append(dump(r))
            elif step[0] == "resources":
                items, cursor = [], None
                while True:
                    page = await client.list_resources(cursor=cursor)
                    items.extend(dump(x) for x in page.resources)
                    cursor = page.next_cursor
                    if not cursor:
                        break
                out.append({"resources": items})
            elif step[0] == "read":
                r = await client.read_resource(step[1])
                out.append(dump(r))
        except Exception as e:  # noqa: BLE001 - the test reads the failure
            out.append({"error": f"{type(e).__name__}: {e}"})
    return out


async def main():
    kind = sys.argv[1]
    if kind == "http":
        url, token, plan = sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
        async with httpx2.AsyncClient(
            headers={"Authorization": f"Bearer {token}"},
            timeout=httpx2.Timeout(30, read=60),
        ) as http:
            async with Client(streamable_http_client(url, http_client=http), cache=None) as c:
                out = await run_plan(c, plan)
    else:
        command, plan = json.loads(sys.argv[2]), json.loads(sys.argv[3])
        params = StdioServerParameters(command=command[0], args=command[1:])
        async with Client(params, cache=None) as c:
            out = await run_plan(c, plan)
    print(json.dumps(out))


anyio.run(main)
