"""LoCoMo through LangGraph's store interface: every turn put as a keyed
item (namespace `("locomo", session)`, key its dia_id, value `{"text",
"dia_id"}`, `index=["text"]`), every question asked with `search(("locomo",),
query=..., limit=10)`, R@10 over categories 1-4, next to the R@10 of
`hippocamp eval locomo --as-items --no-reference-time` on the same data.

Usage:
  hippocamp eval locomo-export ../shared/data/locomo/locomo-dev.json > export.json
  hippocamp eval locomo --json --no-isolation --no-reference-time --as-items \\
      ../shared/data/locomo/locomo-dev.json > eval.json
  HIPPOCAMP_TOKEN=... python locomo_langgraph.py \\
      hippocamp://127.0.0.1:8765 APP export.json eval.json
The token must grant app APP, which must hold nothing else (the scores
count every entry of a user). Prints one JSON line.
"""

import json
import sys

from hippocamp.langgraph import HippocampStore


def main(uri: str, app: str, export_path: str, eval_path: str) -> None:
    data = json.load(open(export_path))
    recalls = []
    for s in data["samples"]:
        store = HippocampStore(uri, app=app, user=s["user"])
        for sess in s["sessions"]:
            for e in sess["events"]:
                value = {"text": e["content"]["parts"][0]["text"], "dia_id": e["id"]}
                store.put(("locomo", sess["id"]), e["id"], value, index=["text"])
        for q in s["questions"]:
            if not 1 <= q["category"] <= 4:
                continue
            hits = store.search(("locomo",), query=q["text"], limit=10)
            ranked = [h.value.get("dia_id") for h in hits]
            found = sum(1 for e in q["evidence"] if e in ranked)
            recalls.append(found / len(q["evidence"]))
        store.close()
    evaluated = json.load(open(eval_path))
    print(
        json.dumps(
            {
                "questions": len(recalls),
                "settings": {
                    "mode": evaluated["mode"],
                    "limit": 10,
                    "as_items": True,
                    "reference_time": False,
                },
                "langgraph_recall_at_10": sum(recalls) / len(recalls),
                "eval_recall_at_10": evaluated["recall_at_10"],
            }
        )
    )


if __name__ == "__main__":
    main(*sys.argv[1:5])
