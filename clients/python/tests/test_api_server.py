"""`adk api_server` loads both services from a `services.py` in the agents
directory (no change to ADK), and its memory route ingests a session into
hippocamp."""

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
from conftest import APP

from hippocamp import Client

SERVICES = """
from google.adk.cli.service_registry import get_service_registry
from hippocamp.adk import HippocampArtifactService, HippocampMemoryService

registry = get_service_registry()
registry.register_memory_service("hippocamp", HippocampMemoryService.from_uri)
registry.register_artifact_service("hippocamp", HippocampArtifactService.from_uri)
"""

AGENT = """
from google.adk.agents import LlmAgent

root_agent = LlmAgent(name="adk", model="gemini-2.0-flash", instruction="Be brief.")
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_api_server_memory_route_reaches_hippocamp(url, token, user, tmp_path: Path):
    agents = tmp_path / "agents"
    (agents / APP).mkdir(parents=True)
    (agents / "services.py").write_text(SERVICES)
    (agents / APP / "__init__.py").write_text("from . import agent\n")
    (agents / APP / "agent.py").write_text(AGENT)
    port = free_port()
    adk = Path(sys.executable).parent / "adk"
    proc = subprocess.Popen(
        [
            str(adk),
            "api_server",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            f"--memory_service_uri={url}",
            f"--artifact_service_uri={url}",
            str(agents),
        ],
        env={**os.environ, "HIPPOCAMP_TOKEN": token},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        base = f"http://127.0.0.1:{port}"
        for _ in range(300):
            try:
                if httpx.get(f"{base}/list-apps", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if proc.poll() is not None:
                raise AssertionError(proc.stderr.read().decode())
            time.sleep(0.1)
        events = [
            {
                "id": "x1",
                "author": "user",
                "invocation_id": "i1",
                "timestamp": 1700000000.0,
                "content": {"role": "user", "parts": [{"text": "My cat is called Miso"}]},
            }
        ]
        r = httpx.post(
            f"{base}/apps/{APP}/users/{user}/sessions", json={"session_id": "s1", "events": events}
        )
        assert r.status_code == 200, r.text
        r = httpx.patch(f"{base}/apps/{APP}/users/{user}/memory", json={"session_id": "s1"})
        assert r.status_code == 200, r.text
        with Client(url, token) as c:
            for _ in range(200):
                hits = c.search(APP, user, "cat name")["hits"]
                if hits:
                    break
                time.sleep(0.05)
        assert hits[0]["content"] == "My cat is called Miso"
        # The artifact routes go to hippocamp too.
        r = httpx.post(
            f"{base}/apps/{APP}/users/{user}/sessions/s1/artifacts",
            json={"filename": "note.txt", "artifact": {"text": "hi"}},
        )
        assert r.status_code == 200, r.text
        with Client(url, token) as c:
            assert c.list_names(APP, user, session="s1")["items"] == ["note.txt"]
    finally:
        proc.terminate()
        proc.wait(timeout=10)
