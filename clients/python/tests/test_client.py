"""The typed client against a live server, blocking and async."""

import asyncio

import pytest
from conftest import APP

import hippocamp
from hippocamp import AsyncClient, Client


def test_memory_round_trip_and_typed_errors(url, token, user):
    with Client(url, token) as c:
        added = c.add_entry(APP, user, "Prefers window seats", metadata={"topic": "travel"})
        entry = added["entry"]
        assert entry["scope"] == {"app": APP, "user": user}
        keyed = c.add_entry(APP, user, "Likes aisle seats too", idempotency_key="k1")
        again = c.add_entry(APP, user, "Likes aisle seats too", idempotency_key="k1")
        assert again["duplicate"] and again["entry"]["id"] == keyed["entry"]["id"]
        hits = c.search(APP, user, "window seat", limit=5)["hits"]
        assert hits and hits[0]["content"] == "Prefers window seats"
        assert c.get_entry(APP, user, entry["id"])["content"] == "Prefers window seats"
        assert c.delete_entry(APP, user, entry["id"])["deleted"] == 1
        with pytest.raises(hippocamp.NotFound) as e:
            c.get_entry(APP, user, entry["id"])
        assert e.value.code == "not_found" and e.value.status == 404
        with pytest.raises(hippocamp.InvalidArgument):
            c.search(APP, user, "")
        r = c.add_events(
            APP,
            user,
            "s1",
            [
                {
                    "id": "e1",
                    "author": "user",
                    "timestamp_ms": 1,
                    "content": {"parts": [{"text": "I keep bees"}]},
                }
            ],
        )
        assert len(r["added"]) == 1
        # A secret in a turn is redacted, the turn kept; the reply says where.
        r = c.add_events(
            APP,
            user,
            "s1",
            [
                {
                    "id": "e2",
                    "author": "user",
                    "timestamp_ms": 2,
                    "content": {"parts": [{"text": "the hive key is AKIAIOSFODNN7EXAMPLE"}]},
                }
            ],
        )
        assert r["added"][0]["redacted"] == [
            {"kind": "aws_access_key_id", "start": 16, "end": 36}
        ]
        # The turns around a hit come with it on request.
        hits = c.search(APP, user, "hive", limit=1, context=(1, 0))["hits"]
        assert hits[0]["content"] == "the hive key is [REDACTED]"
        assert [e["content"] for e in hits[0]["context"]["before"]] == ["I keep bees"]
        # Another user of the app sees nothing of this one.
        assert c.search(APP, user + "-other", "bees")["hits"] == []
        queued = c.ingest(
            APP,
            user,
            "s2",
            [
                {
                    "id": "q1",
                    "author": "user",
                    "timestamp_ms": 2,
                    "content": {"parts": [{"text": "I also keep a goat"}]},
                }
            ],
        )
        job = queued["jobs"][0]["id"]
        assert c.job(APP, user, job)["id"] == job
        assert c.memory_capabilities()["limits"]
        erased = c.delete_user(APP, user)
        assert erased["epoch"] == 1 and "sessions" in erased
    with pytest.raises(hippocamp.Unauthorized):
        Client(url, "hct_not_a_token").search(APP, user, "x")
    with pytest.raises(hippocamp.Forbidden):
        Client(url, token).search("another-app", user, "x")


def test_consolidation_merges_reverts_and_keys_supersede(url, token, user):
    with Client(url, token) as c:
        for text in [
            "My locker code hint is the year we met",
            "my locker code hint is the year we met!",
        ]:
            c.add_entry(APP, user, text)
        c.add_entry(APP, user, "Home city: Lisbon", fact_key="user.home_city")
        c.add_entry(APP, user, "Home city: Porto", fact_key="user.home_city")
        run = c.consolidate(APP, user)
        assert run["state"] == "applied" and len(run["changes"]) == 1
        fact = run["changes"][0]["fact"]
        hits = c.search(APP, user, "locker code hint")["hits"]
        assert [h["id"] for h in hits] == [fact] and hits[0]["origin"] == "fact"
        merged = c.search(APP, user, "locker code hint", include_merged=True)["hits"]
        assert len(merged) == 3 and {h.get("status", "current") for h in merged} == {
            "current",
            "merged",
        }
        assert len(c.lineage(APP, user, fact)["sources"]) == 2
        assert c.consolidations(APP, user)["runs"][0]["id"] == run["id"]
        assert c.consolidation(APP, user, run["id"])["changes"][0]["after"]
        # The newer keyed fact supersedes the older.
        cities = [h["content"] for h in c.search(APP, user, "home city")["hits"]]
        assert cities == ["Home city: Porto"]
        both = c.search(APP, user, "home city", include_superseded=True)["hits"]
        assert len(both) == 2
        assert c.revert_consolidation(APP, user, run["id"])["state"] == "reverted"
        assert len(c.search(APP, user, "locker code hint")["hits"]) == 2
        with pytest.raises(hippocamp.Conflict) as e:
            c.revert_consolidation(APP, user, run["id"])
        assert e.value.code == "run_conflict"
        proposed = c.consolidate(APP, user, review=True)
        assert proposed["state"] == "proposed"
        assert c.apply_consolidation(APP, user, proposed["id"])["state"] == "applied"
        with pytest.raises(hippocamp.Conflict):
            c.apply_consolidation(APP, user, proposed["id"])


def test_artifacts_stream_both_ways(url, token, user):
    with Client(url, token) as c:
        chunks = [b"a" * 70_000, b"b" * 70_000, b"c"]
        meta = c.put_artifact(
            APP, user, "logs/run.txt", iter(chunks), mime_type="text/plain", metadata={"run": 7}
        )
        assert meta["version"] == 1 and meta["size"] == 140_001
        c.put_artifact(APP, user, "logs/run.txt", b"second", session="s9")
        assert c.get_artifact(APP, user, "logs/run.txt") == b"".join(chunks)
        assert b"".join(c.stream_artifact(APP, user, "logs/run.txt")) == b"".join(chunks)
        assert c.artifact_meta(APP, user, "logs/run.txt")["metadata"] == {"run": 7}
        head = c.head_artifact(APP, user, "logs/run.txt")
        assert head["content-length"] == "140001"
        assert c.artifact_capabilities()
        assert c.list_names(APP, user)["items"] == ["logs/run.txt"]
        assert c.list_names(APP, user, session="s9")["items"] == ["logs/run.txt"]
        assert [v["version"] for v in c.list_versions(APP, user, "logs/run.txt")["items"]] == [1]
        assert c.delete_artifact(APP, user, "logs/run.txt")["removed"] == [1]
        with pytest.raises(hippocamp.NotFound):
            c.get_artifact(APP, user, "logs/run.txt")


def test_the_async_client_does_the_same(url, token, user):
    async def go():
        async with AsyncClient(url, token) as c:
            await c.add_entry(APP, user, "Allergic to peanuts")
            hits = (await c.search(APP, user, "peanut allergy"))["hits"]
            assert hits[0]["content"] == "Allergic to peanuts"

            async def body():
                yield b"hello "
                yield b"world"

            await c.put_artifact(APP, user, "greeting.txt", body(), mime_type="text/plain")
            parts = [x async for x in c.stream_artifact(APP, user, "greeting.txt")]
            assert b"".join(parts) == b"hello world"
            assert await c.all_names(APP, user) == ["greeting.txt"]

    asyncio.run(go())


def test_preload_is_the_servers_framed_block(url, token, user):
    with Client(url, token) as c:
        c.add_entry(APP, user, "The user's sister lives in Lisbon")
        p = c.preload(APP, user, "Where does my sister live?", limit=3)
        nonce = p["nonce"]
        assert p["block"].startswith(f"[hippocamp-memory nonce={nonce}]")
        assert "Lisbon" in p["block"] and len(p["entries"]) == 1
        assert c.preload(APP, user, "?!") == {"block": None, "nonce": None, "entries": []}
        with pytest.raises(hippocamp.InvalidArgument):
            c.preload(APP, user, "sister", limit=0)
