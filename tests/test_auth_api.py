"""Sign-in, sessions, CSRF, API tokens and users through the real app (remote and loopback callers)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from http.cookies import SimpleCookie

import pytest

from tests.auth_support import (
    OTHER_REMOTE,
    PASSWORD,
    app_with,
    bearer,
    ensure_user,
    issue_token,
    local_client,
    login,
    remote_client,
)


@pytest.fixture
def app_db(sqlite_app_url: str) -> Iterator[str]:
    from tests.conftest import configure_app_database

    configure_app_database(sqlite_app_url)
    yield sqlite_app_url


def _unique(name: str) -> str:
    return f"{name}-{uuid.uuid4().hex[:8]}@example.com"


def _cookies(response) -> dict[str, SimpleCookie]:  # type: ignore[no-untyped-def]
    jar = {}
    for header in response.headers.get_list("set-cookie"):
        cookie: SimpleCookie = SimpleCookie()
        cookie.load(header)
        for key in cookie:
            jar[key] = cookie
    return jar


def _attrs(response, name: str) -> str:  # type: ignore[no-untyped-def]
    return next(h for h in response.headers.get_list("set-cookie") if h.startswith(name + "=")).lower()


def test_remote_anonymous_is_nobody_local_is_admin(app_db: str) -> None:
    remote = remote_client().get("/api/v1/auth/me").json()
    assert remote == {
        "authenticated": False,
        "kind": "anonymous",
        "via": "none",
        "email": None,
        "user_id": None,
        "scopes": [],
    }
    local = local_client().get("/api/v1/auth/me").json()
    assert local["via"] == "loopback"
    assert local["scopes"] == ["plans:read", "plans:write", "benchmarks:run", "admin"]


def test_remote_write_needs_credentials(app_db: str) -> None:
    response = remote_client().post("/api/v1/users", json={"email": _unique("x"), "password": PASSWORD})
    assert response.status_code == 401
    assert response.headers["www-authenticate"] == "Bearer"
    # The same request from the loopback first-run user works.
    assert (
        local_client().post("/api/v1/users", json={"email": _unique("x"), "password": PASSWORD}).status_code
        == 201
    )


@pytest.mark.parametrize(
    ("overrides", "headers"),
    [
        ({"host": "0.0.0.0"}, {}),  # server reachable beyond loopback: nobody is trusted for being local
        ({"allow_anonymous_loopback": False}, {}),
        ({}, {"X-Forwarded-For": "203.0.113.77"}),  # a same-host reverse proxy relaying a visitor
        ({}, {"Forwarded": "for=203.0.113.77"}),
        ({}, {"Host": "evil.example:8000"}),  # DNS rebinding: evil.example resolved to 127.0.0.1
    ],
)
def test_loopback_trust_withdrawn(app_db: str, overrides: dict[str, object], headers: dict[str, str]) -> None:
    client = local_client(app_with(**overrides))
    me = client.get("/api/v1/auth/me", headers=headers).json()
    assert me["scopes"] == [] and me["via"] == "none"
    response = client.post(
        "/api/v1/users", json={"email": _unique("y"), "password": PASSWORD}, headers=headers
    )
    assert response.status_code == 401


@pytest.mark.parametrize(
    ("headers", "status"),
    [
        ({"Origin": "https://evil.example"}, 403),
        ({"Sec-Fetch-Site": "cross-site"}, 403),
        ({"Sec-Fetch-Site": "same-site"}, 403),
        ({"Origin": "null"}, 403),
        ({"Sec-Fetch-Site": "same-origin"}, 201),
        ({"Origin": "http://testserver"}, 201),
        ({}, 201),  # curl and scripts on this machine
    ],
)
def test_loopback_user_protected_from_cross_site_requests(
    app_db: str, headers: dict[str, str], status: int
) -> None:
    """A web page in the local user's browser must not drive the loopback server."""
    body = {"email": _unique("csrf"), "password": PASSWORD}
    assert local_client().post("/api/v1/users", json=body, headers=headers).status_code == status


def test_login_cookie_flags_and_me(app_db: str) -> None:
    email = _unique("ada")
    ensure_user(email)
    client = remote_client()
    response = client.post("/api/v1/auth/login", json={"email": email.upper(), "password": PASSWORD})
    assert response.status_code == 200
    session_attrs = _attrs(response, "cp_session")
    assert "httponly" in session_attrs and "samesite=lax" in session_attrs and "secure" in session_attrs
    csrf_attrs = _attrs(response, "cp_csrf")
    assert "httponly" not in csrf_attrs and "samesite=strict" in csrf_attrs and "secure" in csrf_attrs
    assert csrf_attrs.startswith("cp_csrf=" + response.json()["csrf_token"].lower() + ";")
    me = client.get("/api/v1/auth/me").json()
    assert me["authenticated"] and me["via"] == "cookie" and me["email"] == email
    assert me["scopes"] == ["plans:read", "plans:write", "benchmarks:run"]

    logout = client.post("/api/v1/auth/logout")
    assert logout.status_code == 204
    assert (
        'cp_session=""' in logout.headers["set-cookie"] or "max-age=0" in logout.headers["set-cookie"].lower()
    )
    assert client.get("/api/v1/auth/me").json()["authenticated"] is False


def test_loopback_login_cookie_not_secure(app_db: str) -> None:
    email = _unique("local")
    ensure_user(email)
    response = local_client().post("/api/v1/auth/login", json={"email": email, "password": PASSWORD})
    assert response.status_code == 200
    assert "secure" not in _attrs(response, "cp_session")


def test_wrong_password_and_unknown_user(app_db: str) -> None:
    email = _unique("bob")
    ensure_user(email)
    client = remote_client()
    assert (
        client.post("/api/v1/auth/login", json={"email": email, "password": "wrong password"}).status_code
        == 401
    )
    assert (
        client.post("/api/v1/auth/login", json={"email": _unique("none"), "password": PASSWORD}).status_code
        == 401
    )
    assert (
        "set-cookie"
        not in client.post("/api/v1/auth/login", json={"email": email, "password": "nope nope nope"}).headers
    )


def test_cross_site_login_refused(app_db: str) -> None:
    email = _unique("victim")
    ensure_user(email)
    response = remote_client().post(
        "/api/v1/auth/login",
        json={"email": email, "password": PASSWORD},
        headers={"Origin": "https://evil.example"},
    )
    assert response.status_code == 403


def test_cookie_writes_need_csrf(app_db: str) -> None:
    email = _unique("cookie")
    ensure_user(email)
    client = remote_client()
    csrf = login(client, email)
    body = {"name": "from browser", "scopes": ["plans:read"]}
    assert client.post("/api/v1/tokens", json=body).status_code == 403
    assert client.post("/api/v1/tokens", json=body, headers={"X-CSRF-Token": "forged"}).status_code == 403
    assert (
        client.post("/api/v1/tokens", json=body, headers={"Origin": "https://evil.example"}).status_code
        == 403
    )
    assert client.post("/api/v1/tokens", json=body, headers={"X-CSRF-Token": csrf}).status_code == 201
    assert (
        client.post("/api/v1/tokens", json=body, headers={"Sec-Fetch-Site": "same-origin"}).status_code == 201
    )
    assert (
        client.post("/api/v1/tokens", json=body, headers={"Origin": "https://testserver"}).status_code == 201
    )
    # Reads need no token.
    assert client.get("/api/v1/tokens").json()["count"] == 3


def test_session_of_deactivated_user_is_void(app_db: str) -> None:
    from sqlmodel import Session

    from app.db import get_engine
    from app.models.auth import UserAccount

    email = _unique("leaver")
    user = ensure_user(email)
    client = remote_client()
    login(client, email)
    assert client.get("/api/v1/auth/me").json()["authenticated"]
    with Session(get_engine()) as session:
        row = session.get(UserAccount, user.id)
        assert row is not None
        row.is_active = False
        session.add(row)
        session.commit()
    assert not client.get("/api/v1/auth/me").json()["authenticated"]


def test_token_lifecycle_over_api(app_db: str) -> None:
    email = _unique("tok")
    maker = issue_token(email, ["plans:write"], is_admin=False)
    client = remote_client(client=OTHER_REMOTE)
    created = client.post(
        "/api/v1/tokens",
        json={"name": "nightly export", "scopes": ["plans:read"], "expires_in_days": 7},
        headers=bearer(maker),
    )
    assert created.status_code == 201, created.text
    body = created.json()
    secret = body["token"]
    assert secret.startswith("cpt_") and body["prefix"] == secret[:12]
    assert body["scopes"] == ["plans:read"] and body["last_used_at"] is None
    assert body["expires_at"].endswith("Z") or body["expires_at"].endswith("+00:00")

    listed = client.get("/api/v1/tokens", headers=bearer(maker)).json()
    assert listed["count"] == 2
    assert all("token" not in row for row in listed["data"])
    assert secret not in str(listed)

    assert client.get("/api/v1/auth/me", headers=bearer(secret)).json()["scopes"] == ["plans:read"]
    fetched = client.get(f"/api/v1/tokens/{body['id']}", headers=bearer(maker)).json()
    assert fetched["last_used_at"] is not None and "token" not in fetched

    # Scope escalation through the API is refused.
    escalate = client.post("/api/v1/tokens", json={"name": "x", "scopes": ["admin"]}, headers=bearer(maker))
    assert escalate.status_code == 403
    narrower = client.post(
        "/api/v1/tokens", json={"name": "x", "scopes": ["plans:write"]}, headers=bearer(secret)
    )
    assert narrower.status_code == 403

    # Another user cannot see or revoke it.
    stranger = issue_token(_unique("stranger"), ["plans:read"], is_admin=False)
    assert client.get(f"/api/v1/tokens/{body['id']}", headers=bearer(stranger)).status_code == 404
    assert client.delete(f"/api/v1/tokens/{body['id']}", headers=bearer(stranger)).status_code == 404

    revoked = client.delete(f"/api/v1/tokens/{body['id']}", headers=bearer(maker))
    assert revoked.status_code == 200 and revoked.json()["revoked_at"] is not None
    assert client.get("/api/v1/auth/me", headers=bearer(secret)).status_code == 401


def test_bad_credentials_are_401_not_anonymous(app_db: str) -> None:
    client = remote_client()
    for header in ("Bearer cpt_" + "x" * 43, "Basic dXNlcjpwYXNz", "Bearer something-else", "Bearer"):
        response = client.get("/api/v1/auth/me", headers={"Authorization": header})
        assert response.status_code == 401, header
    # Even on loopback a wrong token does not fall back to the local user.
    assert (
        local_client().get("/api/v1/auth/me", headers={"Authorization": "Bearer cpt_" + "y" * 43}).status_code
        == 401
    )


def test_token_creation_validation(app_db: str) -> None:
    token = issue_token(_unique("val"), ["admin"])
    client = remote_client()
    for body in (
        {"name": "", "scopes": ["plans:read"]},
        {"name": "x", "scopes": []},
        {"name": "x", "scopes": ["root"]},
        {"name": "x", "scopes": ["plans:read"], "expires_in_days": 0},
        {"name": "x", "scopes": ["plans:read"], "expires_in_days": 99999},
    ):
        response = client.post("/api/v1/tokens", json=body, headers=bearer(token))
        assert response.status_code == 422, body
        assert response.json()["detail"][0]["loc"][0] == "body"


def test_admin_manages_users(app_db: str) -> None:
    admin = issue_token(_unique("admin"), ["admin"])
    writer = issue_token(_unique("writer"), ["plans:write"], is_admin=False)
    client = remote_client()
    email = _unique("new")
    created = client.post(
        "/api/v1/users", json={"email": email, "password": PASSWORD, "is_admin": False}, headers=bearer(admin)
    )
    assert created.status_code == 201
    assert set(created.json()) == {"id", "email", "is_admin", "is_active", "created_at"}
    dup = client.post("/api/v1/users", json={"email": email, "password": PASSWORD}, headers=bearer(admin))
    assert dup.status_code == 409
    short = client.post(
        "/api/v1/users", json={"email": _unique("s"), "password": "short"}, headers=bearer(admin)
    )
    assert short.status_code == 422 and short.json()["detail"][0]["loc"] == ["body", "password"]
    assert (
        client.post(
            "/api/v1/users", json={"email": _unique("w"), "password": PASSWORD}, headers=bearer(writer)
        ).status_code
        == 403
    )
    listing = client.get("/api/v1/users?limit=1", headers=bearer(admin)).json()
    assert len(listing["data"]) == 1 and listing["count"] >= 3
    assert client.get("/api/v1/users", headers=bearer(writer)).status_code == 403
    # The new account can sign in.
    login(remote_client(), email)


def test_login_page_and_form_sign_in(app_db: str) -> None:
    email = _unique("web")
    ensure_user(email)
    client = remote_client()
    page = client.get("/login?next=/plans")
    assert page.status_code == 200 and 'name="password"' in page.text and 'value="/plans"' in page.text
    bad = client.post("/login", data={"email": email, "password": "wrong password", "next": "/plans"})
    assert bad.status_code == 401 and "Wrong e-mail or password" in bad.text
    good = client.post(
        "/login", data={"email": email, "password": PASSWORD, "next": "/plans"}, follow_redirects=False
    )
    assert good.status_code == 303 and good.headers["location"] == "/plans"
    assert "cp_session" in _cookies(good)
    # Open redirects are refused.
    for target in ("//evil.example/", "https://evil.example/", "/\\evil.example"):
        resp = remote_client().post(
            "/login", data={"email": email, "password": PASSWORD, "next": target}, follow_redirects=False
        )
        assert resp.headers["location"] == "/", target


def test_token_pages_with_form_csrf(app_db: str) -> None:
    email = _unique("pages")
    ensure_user(email)
    client = remote_client()
    csrf = login(client, email)
    page = client.get("/tokens")
    assert page.status_code == 200 and f'value="{csrf}"' in page.text
    refused = client.post("/tokens", data={"name": "n", "scopes": ["plans:read"], "expires_in_days": "30"})
    assert refused.status_code == 403
    made = client.post(
        "/tokens",
        data={"name": "laptop", "scopes": ["plans:read"], "expires_in_days": "30", "csrf_token": csrf},
    )
    assert made.status_code == 200 and made.headers["cache-control"] == "no-store"
    secret = made.text.split('<code id="new-token">')[1].split("</code>")[0]
    assert secret.startswith("cpt_")
    again = client.get("/tokens")
    assert secret not in again.text and secret[:12] in again.text  # shown once; the prefix stays
    token_id = client.get("/api/v1/tokens").json()["data"][0]["id"]
    revoked = client.post(f"/tokens/{token_id}/revoke", data={"csrf_token": csrf}, follow_redirects=False)
    assert revoked.status_code == 303
    assert remote_client().get("/api/v1/auth/me", headers=bearer(secret)).status_code == 401


def test_pages_redirect_remote_visitors_to_login(app_db: str) -> None:
    response = remote_client().get("/tokens", headers={"Accept": "text/html"}, follow_redirects=False)
    assert response.status_code == 303 and response.headers["location"] == "/login?next=/tokens"
    htmx = remote_client().get("/tokens", headers={"HX-Request": "true"}, follow_redirects=False)
    assert htmx.status_code == 401 and htmx.headers["hx-redirect"] == "/login?next=/tokens"
    local = local_client().get("/tokens")
    assert local.status_code == 200 and "clusterplan users create" in local.text


def test_admin_deactivates_and_resets_users(app_db: str) -> None:
    admin = issue_token(_unique("boss"), ["admin"])
    client = remote_client()
    email = _unique("worker")
    user_id = client.post(
        "/api/v1/users", json={"email": email, "password": PASSWORD}, headers=bearer(admin)
    ).json()["id"]
    worker_token = issue_token(email, ["plans:read"], is_admin=False)
    browser = remote_client(client=OTHER_REMOTE)
    login(browser, email)

    off = client.patch(f"/api/v1/users/{user_id}", json={"is_active": False}, headers=bearer(admin))
    assert off.status_code == 200 and off.json()["is_active"] is False
    assert client.get("/api/v1/auth/me", headers=bearer(worker_token)).status_code == 401
    assert browser.get("/api/v1/auth/me").json()["authenticated"] is False
    assert (
        remote_client().post("/api/v1/auth/login", json={"email": email, "password": PASSWORD}).status_code
        == 401
    )

    on = client.patch(
        f"/api/v1/users/{user_id}",
        json={"is_active": True, "password": "a brand new password"},
        headers=bearer(admin),
    )
    assert on.status_code == 200
    assert (
        remote_client().post("/api/v1/auth/login", json={"email": email, "password": PASSWORD}).status_code
        == 401
    )
    login(remote_client(), email, "a brand new password")
    assert client.patch(f"/api/v1/users/{uuid.uuid4()}", json={}, headers=bearer(admin)).status_code == 404
    short = client.patch(f"/api/v1/users/{user_id}", json={"password": "short"}, headers=bearer(admin))
    assert short.status_code == 422


def test_last_administrator_cannot_be_removed(empty_db_url: str) -> None:
    from app.startup import prepare_database
    from tests.conftest import configure_app_database

    configure_app_database(empty_db_url)
    prepare_database()
    only = ensure_user(_unique("only-admin"), is_admin=True)
    client = local_client()
    for change in ({"is_active": False}, {"is_admin": False}):
        response = client.patch(f"/api/v1/users/{only.id}", json=change)
        assert response.status_code == 409, change
    second = ensure_user(_unique("second-admin"), is_admin=True)
    assert client.patch(f"/api/v1/users/{only.id}", json={"is_admin": False}).status_code == 200
    assert client.patch(f"/api/v1/users/{second.id}", json={"is_active": False}).status_code == 409
