"""`hippocamp.langgraph.HippocampStore` against a real server, compared
with LangGraph's own `InMemoryStore` on the same calls, and used by a
graph through `get_store()`."""

import asyncio
import time
from typing import Any, TypedDict

import pytest
from conftest import APP
from langgraph.config import get_store
from langgraph.graph import END, START, StateGraph
from langgraph.store.base import BaseStore
from langgraph.store.memory import InMemoryStore

from hippocamp.langgraph import HippocampStore


def _view(result: Any) -> Any:
    """What both stores must agree on: addresses and values, not times."""
    if result is None:
        return None
    if isinstance(result, list):
        return [_view(r) for r in result]
    if isinstance(result, tuple):
        return result
    return (result.namespace, result.key, result.value)


# The calls, in order: (method, args, kwargs). Items are put a few ms
# apart: items created within one millisecond come in id order.
CALLS: list[tuple[str, tuple, dict]] = [
    ("put", (("users", "prefs"), "food"), {"value": {"text": "likes green tea", "rank": 1}}),
    ("put", (("users", "prefsx"), "food"), {"value": {"text": "a sibling", "rank": 9}}),
    ("put", (("users", "prefs", "deep"), "x"), {"value": {"text": "nested", "rank": 5}}),
    ("put", (("docs",), "readme"), {"value": {"text": "read me", "tags": ["a", "b"]}}),
    ("put", (("users", "prefs"), "drink"), {"value": {"text": "black coffee", "rank": 3}}),
    ("put", (("users", "prefs"), "food"), {"value": {"text": "likes oolong", "rank": 2}}),
    ("get", (("users", "prefs"), "food"), {}),
    ("get", (("users", "prefs"), "missing"), {}),
    ("search", (("users", "prefs"),), {}),
    ("search", (("users",),), {}),
    ("search", (("users",),), {"filter": {"rank": {"$gt": 2}}}),
    ("search", (("users",),), {"filter": {"rank": {"$ne": 9}}, "limit": 2}),
    ("search", (("users",),), {"offset": 1, "limit": 2}),
    ("search", ((),), {"filter": {"tags": ["a", "b"]}}),
    ("search", (("users",),), {"filter": {"text": "black coffee"}}),
    ("list_namespaces", (), {}),
    ("list_namespaces", (), {"prefix": ("users",)}),
    ("list_namespaces", (), {"prefix": ("users", "*"), "max_depth": 2}),
    ("list_namespaces", (), {"suffix": ("deep",)}),
    ("list_namespaces", (), {"limit": 2, "offset": 1}),
    ("delete", (("users", "prefs"), "drink"), {}),
    ("get", (("users", "prefs"), "drink"), {}),
    ("search", (("users", "prefs"),), {}),
    ("put", (("users", "prefs"), "drink"), {"value": {"text": "tea again", "rank": 4}}),
    ("search", (("users", "prefs"),), {}),
]


def _run(store: BaseStore, pause: float) -> list[Any]:
    out = []
    for method, args, kw in CALLS:
        if method == "put":
            store.put(*args, kw["value"])
            time.sleep(pause)
            out.append(None)
        else:
            out.append(_view(getattr(store, method)(*args, **kw)))
    return out


def test_equal_to_langgraphs_in_memory_store(url, token, user):
    ours = HippocampStore(url, app=APP, user=user, token=token)
    theirs = InMemoryStore()
    for (method, args, kw), a, b in zip(CALLS, _run(ours, 0.005), _run(theirs, 0), strict=True):
        assert a == b, (method, args, kw)
    ours.close()


def test_queries_rank_indexed_fields_and_index_false_hides(url, token, user):
    store = HippocampStore(url, app=APP, user=user, token=token)
    store.put(("m",), "a", {"text": "the user adopted a cat named Miso", "other": "x"})
    store.put(("m",), "b", {"text": "unrelated", "note": "cat"}, index=["text"])
    store.put(("m",), "c", {"text": "a cat too"}, index=False)
    hits = store.search(("m",), query="cat named Miso")
    assert [h.key for h in hits] == ["a"]
    assert hits[0].score is not None and hits[0].score > 0
    # Found by key and filter, never by a query.
    assert store.get(("m",), "c").value == {"text": "a cat too"}
    assert [h.key for h in store.search(("m",), filter={"text": "a cat too"})] == ["c"]
    # A namespace prefix never takes a sibling.
    store.put(("ab",), "k", {"text": "sibling"})
    store.put(("a", "b"), "k", {"text": "child"})
    assert [h.namespace for h in store.search(("a",))] == [("a", "b")]
    store.close()


def test_async_calls_and_ttl(url, token, user):
    async def go() -> None:
        store = HippocampStore(url, app=APP, user=user, token=token)
        await store.aput(("s",), "k", {"text": "kept"})
        await store.aput(("s",), "brief", {"text": "soon gone"}, ttl=0.0001)
        assert (await store.aget(("s",), "k")).value == {"text": "kept"}
        await asyncio.sleep(0.05)
        assert await store.aget(("s",), "brief") is None
        assert await store.alist_namespaces() == [("s",)]
        await store.adelete(("s",), "k")
        assert await store.asearch(("s",)) == []
        await store.aclose()

    asyncio.run(go())


class State(TypedDict):
    user_id: str
    message: str
    recalled: list[str]


def remember(state: State) -> dict:
    store = get_store()
    store.put(("memories", state["user_id"]), "fact-1", {"text": state["message"]})
    return {}


def recall(state: State) -> dict:
    store = get_store()
    hits = store.search(("memories", state["user_id"]), query="where do I live")
    return {"recalled": [h.value["text"] for h in hits]}


def test_a_graph_reads_and_writes_memory_through_get_store(url, token, user):
    store = HippocampStore(url, app=APP, user=user, token=token)
    graph = (
        StateGraph(State)
        .add_node("remember", remember)
        .add_node("recall", recall)
        .add_edge(START, "remember")
        .add_edge("remember", "recall")
        .add_edge("recall", END)
        .compile(store=store)
    )
    out = graph.invoke({"user_id": "u1", "message": "I live in Lisbon", "recalled": []})
    assert out["recalled"] == ["I live in Lisbon"]
    # The same item, seen through the plain client: it is a memory entry.
    hits = store._client().search(APP, user, "Lisbon")["hits"]
    assert [h["content"] for h in hits] == ["I live in Lisbon"]
    with pytest.raises(Exception):  # noqa: B017 - a namespace must hold a label
        store.put((), "k", {"text": "x"})
    store.close()
