"""Helpers for the auth and security tests: remote/loopback clients, users and tokens in the app's database.

Nobody is an administrator without credentials, not even on loopback: authenticate explicitly
(`issue_token` + `bearer`, or `login`).
"""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient
from sqlmodel import Session

from app.auth.tokens import create_token
from app.auth.users import create_user, find_user
from app.db import get_engine
from app.main import create_app
from app.models.auth import UserAccount
from app.settings import Settings, get_settings

REMOTE = ("203.0.113.5", 5000)  # TEST-NET-3: never loopback
OTHER_REMOTE = ("198.51.100.7", 5000)
PASSWORD = "correct horse battery staple"


def app_with(**overrides: Any) -> Any:
    """The real app, with settings overridden (same database as the current settings)."""
    settings = get_settings().model_copy(update=overrides) if overrides else get_settings()
    assert isinstance(settings, Settings)
    return create_app(settings)


def remote_client(app: Any = None, client: tuple[str, int] = REMOTE) -> TestClient:
    """A client that is not on loopback; https so that Secure cookies travel back."""
    return TestClient(app or app_with(), client=client, base_url="https://testserver")


def unthrottled_client() -> TestClient:
    """A remote client of an app without the per-minute API rate limit: for tests that send many requests."""
    return remote_client(app_with(rate_limit_per_minute=0))


def loopback_client(app: Any = None, headers: dict[str, str] | None = None) -> TestClient:
    """TestClient's default peer, which counts as loopback: anonymous unless `headers` carry a credential."""
    return TestClient(app or app_with(), headers=headers)


def admin_headers(email: str = "support-admin@example.com") -> dict[str, str]:
    """A bearer header of an administrator's fresh API token."""
    return bearer(issue_token(email, ["admin"], is_admin=True))


def ensure_user(email: str, is_admin: bool = False, password: str = PASSWORD) -> UserAccount:
    with Session(get_engine()) as session:
        user = find_user(session, email)
        if user is None:
            user = create_user(session, email, password, is_admin=is_admin)
        session.expunge(user)
        return user


def issue_token(email: str, scopes: list[str], is_admin: bool = True, days: int | None = 30) -> str:
    user = ensure_user(email, is_admin=is_admin)
    with Session(get_engine()) as session:
        owner = session.get(UserAccount, user.id)
        assert owner is not None
        return create_token(session, owner, f"test {' '.join(scopes)}", scopes, days).plaintext


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def login(client: TestClient, email: str, password: str = PASSWORD) -> str:
    """Sign in through the API; returns the CSRF token."""
    response = client.post("/api/v1/auth/login", json={"email": email, "password": password})
    assert response.status_code == 200, response.text
    return str(response.json()["csrf_token"])
