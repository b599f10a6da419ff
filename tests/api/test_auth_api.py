"""Sign-in, sessions, CSRF, API tokens and users through the real app (remote and loopback callers).

Nobody is an administrator without credentials, loopback included.
"""

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
    login,
    loopback_client,
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


ANONYMOUS = {
    "authenticated": False,
    "kind": "anonymous",
    "via": "none",
    "email": None,
    "user_id": None,
    "scopes": [],
}


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"X-Forwarded-For": "127.0.0.1"},
        {"X-Client-IP": "127.0.0.1"},
        {"True-Client-IP": "127.0.0.1"},
        {"CF-Connecting-IP": "127.0.0.1"},
        {"Host": "localhost:8000"},
    ],
)
def test_anonymous_is_nobody_even_on_loopback(app_db: str, headers: dict[str, str]) -> None:
    """No header and no address makes a caller an administrator: neither from afar nor from this machine."""
    for client in (remote_client(), loopback_client(app_with(host="127.0.0.1"))):
        assert client.get("/api/v1/auth/me", headers=headers).json() == ANONYMOUS
        response = client.post(
            "/api/v1/users", json={"email": _unique("x"), "password": PASSWORD}, headers=headers
        )
        assert response.status_code == 401
        assert response.headers["www-authenticate"] == "Bearer"


def test_public_reads_stay_public(app_db: str) -> None:
    for client in (remote_client(), loopback_client()):
        assert client.get("/api/v1/gpus").status_code == 200
        assert client.get("/catalog/gpus").status_code == 200


@pytest.mark.parametrize(
    ("headers", "status"),
    [
        ({"Origin": "https://evil.example"}, 403),
        ({"Sec-Fetch-Site": "cross-site"}, 403),
        ({"Sec-Fetch-Site": "same-site"}, 403),
        ({"Origin": "null"}, 403),
        ({}, 403),  # a cookie alone is not enough: no CSRF token, no browser vouching
        ({"Sec-Fetch-Site": "same-origin"}, 201),
        ({"Origin": "http://testserver"}, 201),
    ],
)
def test_signed_in_admin_protected_from_cross_site_requests(
    app_db: str, headers: dict[str, str], status: int
) -> None:
    """A web page in the administrator's browser must not drive the server with the admin's cookie."""
    admin = _unique("cookie-admin")
    ensure_user(admin, is_admin=True)
    client = loopback_client()
    login(client, admin)
    body = {"email": _unique("csrf"), "password": PASSWORD}
    assert client.post("/api/v1/users", json=body, headers=headers).status_code == status


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
    response = loopback_client().post("/api/v1/auth/login", json={"email": email, "password": PASSWORD})
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


def _token_row(secret: str):  # type: ignore[no-untyped-def]
    from sqlmodel import Session, select

    from app.db import get_engine
    from app.models.auth import ApiToken

    with Session(get_engine()) as session:
        return session.exec(select(ApiToken).where(ApiToken.prefix == secret[:12])).one()


def _expires(body: dict[str, object]):  # type: ignore[no-untyped-def]
    from datetime import datetime

    return datetime.fromisoformat(str(body["expires_at"]).replace("Z", "+00:00"))


def test_a_token_never_mints_a_token_that_outlives_it(app_db: str) -> None:
    """Through an API token, a new token's expiry is capped at the presenting token's: a request for no expiry
    or a later one gets the cap; a shorter one is kept. A cookie session is not capped."""
    from app.models.base import as_utc

    email = _unique("cap")
    short = issue_token(email, ["plans:read"], is_admin=False, days=1)
    cap = as_utc(_token_row(short).expires_at)
    client = remote_client()
    for lifetime in (None, 30):
        made = client.post(
            "/api/v1/tokens",
            json={"name": f"longer {lifetime}", "scopes": ["plans:read"], "expires_in_days": lifetime},
            headers=bearer(short),
        )
        assert made.status_code == 201, made.text
        assert _expires(made.json()) == cap, lifetime
    week = issue_token(email, ["plans:read"], is_admin=False, days=7)
    shorter = client.post(
        "/api/v1/tokens",
        json={"name": "a day", "scopes": ["plans:read"], "expires_in_days": 1},
        headers=bearer(week),
    )
    assert _expires(shorter.json()) < as_utc(_token_row(week).expires_at)

    forever = issue_token(
        email, ["plans:read"], is_admin=False, days=None
    )  # a token that never expires: no cap
    unlimited = client.post(
        "/api/v1/tokens",
        json={"name": "x", "scopes": ["plans:read"], "expires_in_days": None},
        headers=bearer(forever),
    )
    assert unlimited.json()["expires_at"] is None

    browser = remote_client()
    csrf = login(browser, email)
    page = browser.post(
        "/tokens",
        data={"name": "from the page", "scopes": ["plans:read"], "expires_in_days": "0", "csrf_token": csrf},
    )
    assert page.status_code == 200
    assert (
        next(t for t in browser.get("/api/v1/tokens").json()["data"] if t["name"] == "from the page")[
            "expires_at"
        ]
        is None
    )
    via_page = remote_client().post(
        "/tokens",
        data={"name": "page via token", "scopes": ["plans:read"], "expires_in_days": "0"},
        headers=bearer(short),
    )
    assert via_page.status_code == 200
    made_by_page = next(
        t
        for t in client.get("/api/v1/tokens", headers=bearer(short)).json()["data"]
        if t["name"] == "page via token"
    )
    assert _expires(made_by_page) == cap


def test_a_token_revokes_only_itself_and_tokens_it_holds_every_scope_of(app_db: str) -> None:
    """A plans:read token cannot revoke the user's plans:write or benchmarks:run tokens (403, left alone), but
    may revoke a plans:read one and itself; a cookie session revokes any of them, on the API and the page."""
    email = _unique("revoke")
    strong = issue_token(email, ["plans:write", "benchmarks:run"], is_admin=False)
    weak = issue_token(email, ["plans:read"], is_admin=False, days=1)
    other_reader = issue_token(email, ["plans:read"], is_admin=False)
    writer = issue_token(email, ["plans:write"], is_admin=False)
    ids = {
        name: str(_token_row(secret).id)
        for name, secret in (
            ("strong", strong),
            ("weak", weak),
            ("other_reader", other_reader),
            ("writer", writer),
        )
    }
    client = remote_client()

    refused = client.delete(f"/api/v1/tokens/{ids['strong']}", headers=bearer(weak))
    assert refused.status_code == 403
    assert "lacks that token's scope(s) benchmarks:run, plans:write" in refused.json()["detail"]
    page_refused = client.post(
        f"/tokens/{ids['writer']}/revoke", headers=bearer(weak), follow_redirects=False
    )
    assert page_refused.status_code == 403
    assert client.get("/api/v1/auth/me", headers=bearer(strong)).json()["authenticated"] is True
    assert client.get("/api/v1/auth/me", headers=bearer(writer)).json()["authenticated"] is True

    assert client.delete(f"/api/v1/tokens/{ids['other_reader']}", headers=bearer(weak)).status_code == 200
    assert (
        client.delete(f"/api/v1/tokens/{ids['writer']}", headers=bearer(strong)).status_code == 200
    )  # holds it
    assert client.delete(f"/api/v1/tokens/{ids['weak']}", headers=bearer(weak)).status_code == 200  # itself
    assert client.get("/api/v1/auth/me", headers=bearer(weak)).status_code == 401

    browser = remote_client()
    csrf = login(browser, email)
    revoked = browser.post(
        f"/tokens/{ids['strong']}/revoke", data={"csrf_token": csrf}, follow_redirects=False
    )
    assert revoked.status_code == 303
    assert client.get("/api/v1/auth/me", headers=bearer(strong)).status_code == 401


BAD_AUTHORIZATION = (
    "Bearer cpt_" + "x" * 43,
    "Bearer cpn_" + "x" * 43,
    "Basic dXNlcjpwYXNz",
    "Bearer something-else",
    "Bearer",
    "",
)


@pytest.mark.parametrize("path", ["/api/v1/auth/me", "/api/v1/gpus", "/", "/login"])
def test_bad_credentials_are_401_on_every_route(app_db: str, path: str) -> None:
    """Public routes too: a broken token is reported, never silently ignored."""
    for client in (remote_client(), loopback_client()):
        for header in BAD_AUTHORIZATION:
            response = client.get(path, headers={"Authorization": header})
            assert response.status_code == 401, (path, header)
            assert response.headers["www-authenticate"] == "Bearer"


def test_expired_and_revoked_tokens_are_401_on_public_routes(app_db: str) -> None:
    from datetime import timedelta

    from sqlmodel import Session, select

    from app.db import get_engine
    from app.models.auth import ApiToken
    from app.models.base import utcnow

    expired, revoked = (issue_token(_unique(n), ["plans:read"], is_admin=False) for n in ("exp", "rev"))
    with Session(get_engine()) as session:
        for secret, change in ((expired, "expires_at"), (revoked, "revoked_at")):
            row = session.exec(select(ApiToken).where(ApiToken.prefix == secret[:12])).one()
            setattr(row, change, utcnow() - timedelta(seconds=1))
            session.add(row)
        session.commit()
    for secret in (expired, revoked):
        assert remote_client().get("/api/v1/gpus", headers=bearer(secret)).status_code == 401
    # Liveness probes and static files never look at credentials.
    assert remote_client().get("/healthz", headers=bearer(revoked)).status_code == 200
    assert remote_client().get("/static/css/app.css", headers=bearer(revoked)).status_code == 200


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
    local = loopback_client().get("/tokens", headers={"Accept": "text/html"}, follow_redirects=False)
    assert local.status_code == 303 and local.headers["location"] == "/login?next=/tokens"


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
    client = loopback_client(headers=bearer(issue_token(only.email, ["admin"])))
    for change in ({"is_active": False}, {"is_admin": False}):
        response = client.patch(f"/api/v1/users/{only.id}", json=change)
        assert response.status_code == 409, change
    second = ensure_user(_unique("second-admin"), is_admin=True)
    assert client.patch(f"/api/v1/users/{only.id}", json={"is_admin": False}).status_code == 200
    # The demoted admin's token lost the scope; the remaining admin cannot remove themself.
    assert client.patch(f"/api/v1/users/{second.id}", json={"is_active": False}).status_code == 403
    second_client = loopback_client(headers=bearer(issue_token(second.email, ["admin"])))
    assert second_client.patch(f"/api/v1/users/{second.id}", json={"is_active": False}).status_code == 409


def test_logout_revokes_every_cookie_of_the_user(app_db: str) -> None:
    email = _unique("twice")
    ensure_user(email)
    laptop, phone = remote_client(), remote_client(client=OTHER_REMOTE)
    login(laptop, email)
    login(phone, email)
    stolen = laptop.cookies.get("cp_session")
    assert laptop.post("/api/v1/auth/logout").status_code == 204
    assert phone.get("/api/v1/auth/me").json()["authenticated"] is False
    replay = remote_client()
    replay.cookies.set("cp_session", str(stolen))
    assert replay.get("/api/v1/auth/me").json()["authenticated"] is False
    login(phone, email)  # signing in again works
    assert phone.get("/api/v1/auth/me").json()["authenticated"] is True


def test_password_change_revokes_other_sessions_keeps_this_one(app_db: str) -> None:
    email = _unique("changer")
    ensure_user(email)
    mine, other = remote_client(), remote_client(client=OTHER_REMOTE)
    csrf = login(mine, email)
    login(other, email)
    wrong = mine.post(
        "/api/v1/auth/password",
        json={"current_password": "not it at all", "new_password": "a newer password"},
        headers={"X-CSRF-Token": csrf},
    )
    assert wrong.status_code == 403
    short = mine.post(
        "/api/v1/auth/password",
        json={"current_password": PASSWORD, "new_password": "short"},
        headers={"X-CSRF-Token": csrf},
    )
    assert short.status_code == 422 and short.json()["detail"][0]["loc"] == ["body", "new_password"]
    changed = mine.post(
        "/api/v1/auth/password",
        json={"current_password": PASSWORD, "new_password": "a newer password"},
        headers={"X-CSRF-Token": csrf},
    )
    assert changed.status_code == 200, changed.text
    assert mine.get("/api/v1/auth/me").json()["authenticated"] is True  # a fresh cookie came back
    assert other.get("/api/v1/auth/me").json()["authenticated"] is False
    login(remote_client(), email, "a newer password")


@pytest.mark.parametrize("scopes", [["plans:read"], ["plans:write"], ["admin"]])
def test_an_api_token_cannot_change_the_password(app_db: str, scopes: list[str]) -> None:
    email = _unique("token-holder")
    token = bearer(issue_token(email, scopes, is_admin="admin" in scopes))
    change = {"current_password": PASSWORD, "new_password": "taken over by a token"}
    client = remote_client()
    r = client.post("/api/v1/auth/password", json=change, headers=token)
    assert (
        r.status_code == 403 and r.json()["detail"] == "change the password from a signed-in browser session"
    )
    form = {"email": email, "new_password": "taken over", "confirm_password": "taken over"}
    page = client.post("/account/password", data=form | {"current_password": PASSWORD}, headers=token)
    assert page.status_code == 403
    # nor is the form shown to one: the page answers as its POST does
    shown = client.get("/account/password", headers=token)
    assert shown.status_code == 403 and "new_password" not in shown.text
    assert shown.json()["detail"] == "change the password from a signed-in browser session"
    signed_out = client.get("/account/password", headers={"Accept": "text/html"}, follow_redirects=False)
    assert signed_out.status_code == 303 and signed_out.headers["location"] == "/login?next=/account/password"
    assert client.post("/api/v1/auth/password", json=change).status_code == 401
    login(remote_client(), email)  # the password is unchanged


def test_the_password_route_documents_the_browser_session_it_needs(app_db: str) -> None:
    schema = remote_client().get("/api/v1/openapi.json").json()
    operation = schema["paths"]["/api/v1/auth/password"]["post"]
    assert operation["security"] == [{"sessionCookie": []}]
    assert "403" in operation["responses"] and "401" in operation["responses"]


def test_admin_password_reset_revokes_sessions(app_db: str) -> None:
    admin = issue_token(_unique("resetter"), ["admin"])
    email = _unique("reset")
    user = ensure_user(email)
    browser = remote_client()
    login(browser, email)
    reset = remote_client().patch(
        f"/api/v1/users/{user.id}", json={"password": "set by the admin"}, headers=bearer(admin)
    )
    assert reset.status_code == 200
    assert browser.get("/api/v1/auth/me").json()["authenticated"] is False


class FakeClock:
    def __init__(self) -> None:
        from datetime import UTC, datetime

        self.value = datetime(2030, 1, 1, tzinfo=UTC)

    def __call__(self):  # type: ignore[no-untyped-def]
        return self.value

    def advance(self, seconds: float) -> None:
        from datetime import timedelta

        self.value += timedelta(seconds=seconds)


def _throttled_app(clock: FakeClock):  # type: ignore[no-untyped-def]
    from app.auth.throttle import LoginThrottler

    app = app_with(login_rate_limit_per_minute=0)  # the per-address bucket is tested elsewhere
    app.state.login_throttle = LoginThrottler(now=clock)
    return app


def test_login_backoff_per_account_and_address(app_db: str) -> None:
    email = _unique("backoff")
    ensure_user(email)
    clock = FakeClock()
    app = _throttled_app(clock)
    attacker = remote_client(app)
    wrong = {"email": email, "password": "not the password"}
    assert [attacker.post("/api/v1/auth/login", json=wrong).status_code for _ in range(4)] == [401] * 4
    blocked = attacker.post("/api/v1/auth/login", json={"email": email, "password": PASSWORD})
    assert blocked.status_code == 429 and blocked.headers["retry-after"] == "1"
    # The owner, from their own address, is not slowed down by someone else's failures.
    owner = remote_client(app, client=OTHER_REMOTE)
    assert owner.post("/api/v1/auth/login", json={"email": email, "password": PASSWORD}).status_code == 200
    # The wait doubles per failure: 1 s after the 4th, 2 s after the 5th, 4 s after the 6th.
    clock.advance(1)
    assert attacker.post("/api/v1/auth/login", json=wrong).status_code == 401
    assert attacker.post("/api/v1/auth/login", json=wrong).headers["retry-after"] == "2"
    clock.advance(2)
    assert attacker.post("/api/v1/auth/login", json=wrong).status_code == 401
    form = attacker.post("/login", data={"email": email, "password": PASSWORD})
    assert form.status_code == 429 and form.headers["retry-after"] == "4" and "try again in 4 s" in form.text
    # After the wait the right password works, and success clears the record.
    clock.advance(4)
    assert attacker.post("/api/v1/auth/login", json={"email": email, "password": PASSWORD}).status_code == 200
    assert [attacker.post("/api/v1/auth/login", json=wrong).status_code for _ in range(4)] == [401] * 4


def test_plain_http_from_afar_explains_the_secure_cookie(app_db: str) -> None:
    from fastapi.testclient import TestClient

    email = _unique("lan")
    ensure_user(email)
    body = {"email": email, "password": PASSWORD}
    lan = TestClient(app_with(), client=OTHER_REMOTE, base_url="http://testserver")
    refused = lan.post("/api/v1/auth/login", json=body)
    assert refused.status_code == 400 and "CLUSTERPLAN_INSECURE_COOKIES=true" in refused.json()["detail"]
    assert "set-cookie" not in refused.headers
    page = lan.get("/login")
    assert "CLUSTERPLAN_HTTPS" in page.text and "CLUSTERPLAN_INSECURE_COOKIES" in page.text
    form = lan.post("/login", data=body)
    assert form.status_code == 400 and "needs HTTPS" in form.text
    # Opted in for a LAN without TLS: a non-Secure cookie that the browser keeps.
    insecure = TestClient(app_with(insecure_cookies=True), client=OTHER_REMOTE, base_url="http://testserver")
    allowed = insecure.post("/api/v1/auth/login", json=body)
    assert allowed.status_code == 200 and "secure" not in _attrs(allowed, "cp_session")
    assert insecure.get("/api/v1/auth/me").json()["authenticated"] is True
    # CLUSTERPLAN_HTTPS=true: TLS is outside (a proxy), cookies are always Secure.
    tls = TestClient(app_with(https=True), client=OTHER_REMOTE, base_url="http://testserver")
    secure = tls.post("/api/v1/auth/login", json=body)
    assert secure.status_code == 200 and "secure" in _attrs(secure, "cp_session")


def test_trusted_proxy_headers(app_db: str) -> None:
    from fastapi.testclient import TestClient

    email = _unique("proxied")
    ensure_user(email)
    body = {"email": email, "password": PASSWORD}
    proxied = {
        "X-Forwarded-For": "198.51.100.9",
        "X-Forwarded-Proto": "https",
        "X-Forwarded-Host": "cp.example",
    }
    app = app_with(trusted_proxies="10.0.0.0/8")
    via_proxy = TestClient(app, client=("10.0.0.2", 4000), base_url="http://testserver", headers=proxied)
    response = via_proxy.post("/api/v1/auth/login", json=body)
    assert response.status_code == 200 and "secure" in _attrs(response, "cp_session")
    # Behind the proxy, the browser's origin is the forwarded one. (httpx keeps a Secure cookie off http://.)
    cookie = {"Cookie": f"cp_session={response.cookies['cp_session']}"}
    token = {"name": "n", "scopes": ["plans:read"]}
    for origin, status in (("https://cp.example", 201), ("http://testserver", 403)):
        made = via_proxy.post("/api/v1/tokens", json=token, headers={**cookie, "Origin": origin})
        assert made.status_code == status, origin
    # The same headers from a peer that is not a listed proxy are ignored: plain HTTP from afar.
    direct = TestClient(app, client=("203.0.113.9", 4000), base_url="http://testserver")
    assert direct.post("/api/v1/auth/login", json=body, headers=proxied).status_code == 400


def test_first_run_link_signs_in_once_then_asks_for_a_password(empty_db_url: str) -> None:
    from app.startup import prepare_database, sign_in_banner
    from tests.conftest import ONE_TIME_LINK, configure_app_database

    configure_app_database(empty_db_url)
    prepare_database()
    stale = ONE_TIME_LINK.search(sign_in_banner("http://127.0.0.1:8000"))
    banner = sign_in_banner("http://127.0.0.1:8000")
    found = ONE_TIME_LINK.search(banner)
    assert stale and found and "no administrator can sign in with a password" in banner
    path = found.group(0).removeprefix("http://127.0.0.1:8000")
    browser = loopback_client()
    # Each start replaces the link: the one printed before no longer works.
    old = browser.get(stale.group(0).removeprefix("http://127.0.0.1:8000"), follow_redirects=False)
    assert old.status_code == 400 and "not valid" in old.text
    opened = browser.get(path, follow_redirects=False)
    assert opened.status_code == 303 and opened.headers["location"] == "/account/password"
    assert opened.headers["cache-control"] == "no-store" and "cp_session" in _cookies(opened)
    me = browser.get("/api/v1/auth/me").json()
    assert me["email"] == "admin@localhost" and "admin" in me["scopes"]
    # Single use: a second visit (another browser, another worker) is refused.
    assert loopback_client().get(path, follow_redirects=False).status_code == 400
    # The link token is no API token.
    assert loopback_client().get("/api/v1/auth/me", headers=bearer(path.split("=")[1])).status_code == 401
    assert browser.get("/api/v1/tokens").json()["count"] == 0

    page = browser.get("/account/password")
    assert (
        page.status_code == 200 and "Choose a password" in page.text and "current_password" not in page.text
    )
    csrf = browser.cookies["cp_csrf"]
    form = {"email": "Boss@Example.com", "new_password": "first admin password", "csrf_token": csrf}
    differ = browser.post("/account/password", data={**form, "confirm_password": "something else!"})
    assert differ.status_code == 422 and "confirm_password" in differ.text
    saved = browser.post(
        "/account/password", data={**form, "confirm_password": form["new_password"]}, follow_redirects=False
    )
    assert saved.status_code == 303, saved.text
    assert browser.get("/api/v1/auth/me").json()["email"] == "boss@example.com"  # still signed in here
    assert "Change your password" in browser.get("/account/password").text
    login(remote_client(), "boss@example.com", "first admin password")
    # From now on `serve` says where to sign in; no link.
    after = sign_in_banner("http://127.0.0.1:8000")
    assert ONE_TIME_LINK.search(after) is None and "sign in at http://127.0.0.1:8000/login" in after
    assert "clusterplan users create" in after


def test_first_run_link_needs_a_cookie_the_browser_keeps(empty_db_url: str) -> None:
    from fastapi.testclient import TestClient

    from app.startup import prepare_database, sign_in_banner
    from tests.conftest import ONE_TIME_LINK, configure_app_database

    configure_app_database(empty_db_url)
    prepare_database()
    found = ONE_TIME_LINK.search(sign_in_banner("http://cp.lan:8000"))
    assert found
    path = found.group(0).removeprefix("http://cp.lan:8000")
    lan = TestClient(app_with(), client=OTHER_REMOTE, base_url="http://cp.lan:8000")
    refused = lan.get(path, follow_redirects=False)
    assert refused.status_code == 400 and "CLUSTERPLAN_INSECURE_COOKIES" in refused.text
    # Not used up by the refusal: the same link works once the cookie can be kept.
    ok = TestClient(app_with(insecure_cookies=True), client=OTHER_REMOTE, base_url="http://cp.lan:8000")
    assert ok.get(path, follow_redirects=False).status_code == 303
