"""The top bar says who is signed in and offers "Sign out"; signed out (or called with an API token) it offers
"Sign in"."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tests.auth_support import ensure_user, login, remote_client


@pytest.fixture
def app_db(sqlite_app_url: str) -> Iterator[str]:
    from tests.conftest import configure_app_database

    configure_app_database(sqlite_app_url)
    yield sqlite_app_url


def test_the_top_bar_follows_the_browser_session(app_db: str) -> None:
    email = f"bar-{uuid.uuid4().hex[:8]}@example.com"
    ensure_user(email)
    client = remote_client()
    signed_out = client.get("/login").text
    assert 'class="signin-link" href="/login">Sign in<' in signed_out and "Sign out" not in signed_out
    csrf = login(client, email)
    page = client.get("/plans").text
    assert f'<span class="signed-in-as">{email}</span>' in page
    assert 'action="/logout"' in page and f'name="csrf_token" value="{csrf}"' in page
    assert 'href="/login">Sign in<' not in page
    out = client.post("/logout", data={"csrf_token": csrf}, follow_redirects=False)
    assert out.status_code == 303
    assert 'href="/login">Sign in<' in client.get("/login").text


def test_an_api_token_caller_is_not_shown_as_a_browser_session(client: Any) -> None:
    page = client.get("/plans/new").text
    assert 'href="/login">Sign in<' in page and "signed-in-as" not in page
