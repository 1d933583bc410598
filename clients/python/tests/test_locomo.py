"""LoCoMo through the ADK interface gives `hippocamp eval locomo`'s R@10
(the Rust driver exports the data and runs the eval first)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest


def test_locomo_through_adk_matches_the_eval(url):
    export = os.environ.get("HIPPOCAMP_LOCOMO_EXPORT")
    if not export:
        pytest.skip("HIPPOCAMP_LOCOMO_EXPORT is not set")
    script = Path(__file__).parent.parent / "scripts" / "locomo_adk.py"
    out = subprocess.run(
        [sys.executable, str(script), url, export, os.environ["HIPPOCAMP_LOCOMO_EVAL"]],
        env={**os.environ, "HIPPOCAMP_TOKEN": os.environ["HIPPOCAMP_LOCOMO_TOKEN"]},
        capture_output=True,
        text=True,
        check=True,
    )
    r = json.loads(out.stdout)
    print(r)
    assert r["questions"] > 100
    assert abs(r["adk_recall_at_10"] - r["eval_recall_at_10"]) < 1e-9, r


def test_locomo_through_the_langgraph_store_matches_the_eval(url):
    export = os.environ.get("HIPPOCAMP_LOCOMO_EXPORT")
    if not export:
        pytest.skip("HIPPOCAMP_LOCOMO_EXPORT is not set")
    script = Path(__file__).parent.parent / "scripts" / "locomo_langgraph.py"
    out = subprocess.run(
        [
            sys.executable,
            str(script),
            url,
            "locomo_lg",
            export,
            os.environ["HIPPOCAMP_LOCOMO_ITEMS_EVAL"],
        ],
        env={**os.environ, "HIPPOCAMP_TOKEN": os.environ["HIPPOCAMP_LOCOMO_LG_TOKEN"]},
        capture_output=True,
        text=True,
        check=True,
    )
    r = json.loads(out.stdout)
    print(r)
    assert r["questions"] > 100
    assert abs(r["langgraph_recall_at_10"] - r["eval_recall_at_10"]) < 1e-9, r
