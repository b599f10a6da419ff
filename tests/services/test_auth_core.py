"""Auth building blocks: argon2 passwords, hashed API tokens (both databases), signed sessions, buckets."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import text
from sqlmodel import Session

from app.auth import clientaddr, passwords, sessions
from app.auth.tokens import (
    DISPLAY_PREFIX_CHARS,
    authenticate_token,
    create_token,
    hash_token,
    parse_scopes,
    revoke_token,
)
from app.auth.users import UserExistsError, authenticate, create_user
from app.db import get_engine
from app.models.auth import ApiToken, UserAccount
from app.models.base import utcnow


def test_password_hash_is_argon2id_and_verifies() -> None:
    digest = passwords.hash_password("a long enough secret")
    assert digest.startswith("$argon2id$")
    assert "a long enough secret" not in digest
    assert passwords.verify_password(digest, "a long enough secret")
    assert not passwords.verify_password(digest, "a long enough secreT")
    assert not passwords.verify_password(None, "a long enough secret")  # unknown user
    assert not passwords.verify_password("not a hash", "whatever")
    # Two hashes of one password differ (random salt).
    assert passwords.hash_password("a long enough secret") != digest


def test_password_policy() -> None:
    with pytest.raises(ValueError, match="at least 10"):
        passwords.hash_password("short")
    with pytest.raises(ValueError, match="at most"):
        passwords.hash_password("x" * (passwords.MAX_PASSWORD_LENGTH + 1))


def test_users_on_both_databases(db_url: str) -> None:
    with Session(get_engine()) as session:
        user = create_user(session, "  Ada@Example.COM ", "correct horse battery", is_admin=True)
        assert user.email == "ada@example.com"
        with pytest.raises(UserExistsError):
            create_user(session, "ada@example.com", "another password 123")
        with pytest.raises(ValueError, match="e-mail"):
            create_user(session, "not-an-email", "correct horse battery")
        assert authenticate(session, "ADA@example.com", "correct horse battery") is not None
        assert authenticate(session, "ada@example.com", "wrong password!!") is None
        assert authenticate(session, "nobody@example.com", "correct horse battery") is None
        user.is_active = False
        session.add(user)
        session.commit()
        assert authenticate(session, "ada@example.com", "correct horse battery") is None


def test_tokens_shown_once_stored_hashed(db_url: str) -> None:
    with Session(get_engine()) as session:
        user = create_user(session, "grace@example.com", "correct horse battery")
        issued = create_token(session, user, "ci", ["plans:read", "plans:write"], expires_in_days=30)
        plaintext = issued.plaintext
        assert plaintext.startswith("cpt_") and len(plaintext) == 4 + 43  # 32 random bytes, base64url
        row = session.get(ApiToken, issued.token.id)
        assert row is not None
        assert row.token_hash == hash_token(plaintext) and len(row.token_hash) == 64
        assert row.prefix == plaintext[:DISPLAY_PREFIX_CHARS]
        assert row.scopes == "plans:read plans:write"
        # Nowhere in the table does the secret appear.
        dump = " ".join(str(v) for r in session.exec(text("SELECT * FROM api_token")).all() for v in r)  # type: ignore[call-overload]
        assert plaintext not in dump and plaintext[DISPLAY_PREFIX_CHARS:] not in dump

        assert row.last_used_at is None
        identity = authenticate_token(session, plaintext)
        assert identity is not None
        assert identity.email == "grace@example.com"
        assert identity.scopes == frozenset({"plans:read", "plans:write"})
        session.refresh(row)
        assert row.last_used_at is not None

        assert authenticate_token(session, plaintext + "x") is None
        assert authenticate_token(session, "cpt_" + "A" * 43) is None
        assert authenticate_token(session, "not-a-token") is None


def test_token_expiry_revocation_and_inactive_user(db_url: str) -> None:
    with Session(get_engine()) as session:
        user = create_user(session, "linus@example.com", "correct horse battery")
        expired = create_token(session, user, "old", "plans:read", expires_in_days=1)
        expired.token.expires_at = utcnow() - timedelta(seconds=1)
        session.add(expired.token)
        session.commit()
        assert authenticate_token(session, expired.plaintext) is None

        never = create_token(session, user, "forever", "plans:read", expires_in_days=None)
        assert never.token.expires_at is None
        assert authenticate_token(session, never.plaintext) is not None
        revoke_token(session, never.token)
        assert never.token.revoked_at is not None
        assert authenticate_token(session, never.plaintext) is None

        live = create_token(session, user, "live", "plans:read")
        user_row = session.get(UserAccount, user.id)
        assert user_row is not None
        user_row.is_active = False
        session.add(user_row)
        session.commit()
        assert authenticate_token(session, live.plaintext) is None


def test_token_scopes_capped_by_user(db_url: str) -> None:
    with Session(get_engine()) as session:
        plain = create_user(session, "user@example.com", "correct horse battery")
        with pytest.raises(PermissionError, match="admin"):
            create_token(session, plain, "x", ["admin"])
        # A token may not grant more than the credential that makes it.
        with pytest.raises(PermissionError, match="plans:write"):
            create_token(session, plain, "x", ["plans:write"], allowed=frozenset({"plans:read"}))
        admin = create_user(session, "root@example.com", "correct horse battery", is_admin=True)
        issued = create_token(session, admin, "ops", ["admin"])
        identity = authenticate_token(session, issued.plaintext)
        assert identity is not None
        assert identity.scopes == frozenset({"plans:read", "plans:write", "benchmarks:run", "admin"})
        # Demoting the user takes effect on tokens already issued.
        admin.is_admin = False
        session.add(admin)
        session.commit()
        identity = authenticate_token(session, issued.plaintext)
        assert identity is not None and "admin" not in identity.scopes


def test_parse_scopes() -> None:
    assert parse_scopes("plans:write, plans:read") == ["plans:read", "plans:write"]
    with pytest.raises(ValueError, match="unknown scope"):
        parse_scopes(["plans:read", "root"])
    with pytest.raises(ValueError, match="at least one"):
        parse_scopes([])


def test_session_cookie_signed_and_expiring(monkeypatch: pytest.MonkeyPatch) -> None:
    import uuid

    data = sessions.SessionData(user_id=uuid.uuid4(), csrf_token=sessions.new_csrf_token(), version=3)
    value = sessions.encode_session("k" * 40, data)
    assert sessions.decode_session("k" * 40, value) == data
    assert sessions.decode_session("other-key" * 5, value) is None  # another server's secret
    tampered = value[:-2] + ("AA" if value[-2:] != "AA" else "BB")
    assert sessions.decode_session("k" * 40, tampered) is None
    assert sessions.decode_session("k" * 40, "garbage") is None
    monkeypatch.setattr(sessions, "SESSION_MAX_AGE_S", -1)
    assert sessions.decode_session("k" * 40, value) is None  # expired


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.8.9.10", True),
        ("::1", True),
        ("[::1]", True),
        ("localhost", True),
        ("testclient", True),
        ("10.0.0.1", False),
        ("203.0.113.5", False),
        ("0.0.0.0", False),
        ("evil.example", False),
        ("localhost.evil.example", False),
        ("", False),
        (None, False),
    ],
)
def test_loopback_addresses(host: str | None, loopback: bool) -> None:
    assert clientaddr.is_loopback_address(host) is loopback


def test_session_cookie_without_a_version_is_refused() -> None:
    """Cookies issued before session versions existed cannot be revoked, so they are not accepted."""
    from itsdangerous import URLSafeTimedSerializer

    old = URLSafeTimedSerializer("k" * 40, salt="clusterplan.session.v1").dumps(
        {"uid": "00000000-0000-0000-0000-000000000001", "csrf": "x"}
    )
    assert sessions.decode_session("k" * 40, old) is None


@pytest.mark.parametrize(
    ("failures", "wait"),
    [(0, 0.0), (1, 0.0), (3, 0.0), (4, 1.0), (5, 2.0), (6, 4.0), (13, 512.0), (14, 900.0), (10_000, 900.0)],
)
def test_backoff_doubles_after_three_free_failures_capped_at_15_minutes(failures: int, wait: float) -> None:
    from app.auth.throttle import backoff_seconds

    assert backoff_seconds(failures) == wait


def _conn(peer: str, headers: dict[str, str] | None = None, scheme: str = "http"):  # type: ignore[no-untyped-def]
    from starlette.requests import HTTPConnection

    raw = [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()]
    scope = {
        "type": "http",
        "scheme": scheme,
        "client": (peer, 1234),
        "headers": raw,
        "path": "/",
        "server": ("testserver", 80),
        "query_string": b"",
    }
    return HTTPConnection(scope)


def _settings(**values: object):  # type: ignore[no-untyped-def]
    from app.settings import Settings

    return Settings(**values)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("trusted", "peer", "xff", "client"),
    [
        ("", "127.0.0.1", "203.0.113.5", "127.0.0.1"),  # nobody trusted: the header is ignored
        ("10.0.0.0/8", "203.0.113.9", "198.51.100.1", "203.0.113.9"),  # peer not a proxy: ignored
        ("10.0.0.0/8", "10.0.0.2", "198.51.100.1", "198.51.100.1"),
        (
            "10.0.0.0/8",
            "10.0.0.2",
            "6.6.6.6, 198.51.100.1",
            "198.51.100.1",
        ),  # the client's own claim is skipped
        ("10.0.0.0/8, 127.0.0.1", "127.0.0.1", "198.51.100.1, 10.1.1.1", "198.51.100.1"),  # two proxies
        ("10.0.0.0/8", "10.0.0.2", "not-an-ip, 10.0.0.7", "10.0.0.7"),
        ("10.0.0.0/8", "10.0.0.2", "", "10.0.0.2"),
        ("::1", "::1", "2001:db8::5", "2001:db8::5"),
    ],
)
def test_client_address_believes_only_trusted_proxies(trusted: str, peer: str, xff: str, client: str) -> None:
    headers = {"X-Forwarded-For": xff} if xff else {}
    assert clientaddr.client_address(_conn(peer, headers), _settings(trusted_proxies=trusted)) == client


def test_scheme_and_host_from_trusted_proxies_only() -> None:
    headers = {"X-Forwarded-Proto": "https", "X-Forwarded-Host": "cp.example", "Host": "internal:8000"}
    trusted = _settings(trusted_proxies="10.0.0.1")
    assert clientaddr.request_scheme(_conn("10.0.0.1", headers), trusted) == "https"
    assert clientaddr.request_host(_conn("10.0.0.1", headers), trusted) == "cp.example"
    assert clientaddr.request_scheme(_conn("10.0.0.9", headers), trusted) == "http"
    assert clientaddr.request_host(_conn("10.0.0.9", headers), trusted) == "internal:8000"
    odd = {"X-Forwarded-Proto": "gopher"}
    assert clientaddr.request_scheme(_conn("10.0.0.1", odd), trusted) == "http"


def test_trusted_proxies_setting_names_a_bad_entry() -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match=r"'10\.0\.0\.300' is not an IP address or CIDR network"):
        _settings(trusted_proxies="10.0.0.1, 10.0.0.300")


@pytest.mark.parametrize(
    ("values", "peer", "scheme", "secure", "needs_tls"),
    [
        ({}, "127.0.0.1", "http", False, False),  # loopback over plain HTTP: the first-run path
        ({}, "203.0.113.5", "http", True, True),  # the browser would drop it: say so
        ({}, "203.0.113.5", "https", True, False),
        ({"insecure_cookies": True}, "203.0.113.5", "http", False, False),
        ({"https": True}, "203.0.113.5", "http", True, False),  # TLS ends at a proxy
        ({"https": True, "insecure_cookies": True}, "127.0.0.1", "http", True, False),
    ],
)
def test_cookie_secure_rules(
    values: dict[str, object], peer: str, scheme: str, secure: bool, needs_tls: bool
) -> None:
    settings = _settings(**values)
    conn = _conn(peer, scheme=scheme)
    assert sessions.cookie_secure(conn, settings) is secure
    assert sessions.cookie_needs_tls(conn, settings) is needs_tls


def test_throttle_rows_on_both_databases(db_url: str) -> None:
    """The throttle's state lives in the database (every worker sees it); success clears it."""
    from app.auth.throttle import LoginThrottler, throttle_key

    now = utcnow()
    throttle = LoginThrottler(now=lambda: now)
    key = throttle_key(" Ada@Example.com ", "203.0.113.5")
    assert key == "ada@example.com|203.0.113.5"
    with Session(get_engine()) as session:
        waits = [throttle.record_failure(session, key) for _ in range(5)]
        assert waits == [0.0, 0.0, 0.0, 1.0, 2.0]
        assert throttle.retry_after(session, key) == 2.0
        assert throttle.retry_after(session, throttle_key("ada@example.com", "198.51.100.7")) == 0.0
        throttle.clear(session, key)
        assert throttle.retry_after(session, key) == 0.0


def test_session_version_bump_is_atomic_on_both_databases(db_url: str) -> None:
    from app.auth.users import revoke_sessions, set_active

    with Session(get_engine()) as session:
        user = create_user(session, "versions@example.com", "a long enough secret")
        assert user.session_version == 0
        revoke_sessions(session, user.id)
        revoke_sessions(session, user.id)
        session.refresh(user)
        assert user.session_version == 2
        set_active(session, user, False)
        assert user.session_version == 3 and not user.is_active
