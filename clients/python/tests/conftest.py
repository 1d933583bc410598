"""The live server the tests run against, from the environment the Rust
driver (`tests/python.rs`) sets: HIPPOCAMP_URL (hippocamp://HOST:PORT) and
HIPPOCAMP_TOKEN (a token of app `adk` for every user, all permissions)."""

import os
import uuid

import pytest


@pytest.fixture(scope="session")
def url() -> str:
    u = os.environ.get("HIPPOCAMP_URL")
    if not u:
        pytest.skip("HIPPOCAMP_URL is not set (the Rust test `python` starts a server)")
    return u


@pytest.fixture(scope="session")
def token() -> str:
    return os.environ["HIPPOCAMP_TOKEN"]


@pytest.fixture
def user() -> str:
    """A fresh user per test: tests never see each other's data."""
    return f"u-{uuid.uuid4().hex[:12]}"


APP = "adk"
