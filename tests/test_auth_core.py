"""Auth building blocks: argon2 passwords, hashed API tokens (both databases), signed sessions, buckets."""

from __future__ import annotations

from datetime import timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy import text
from sqlmodel import Session

from app.auth import passwords, sessions
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
from app.hooks.ratelimit import TokenBucketLimiter
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

    data = sessions.SessionData(user_id=uuid.uuid4(), csrf_token=sessions.new_csrf_token())
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
    assert sessions.is_loopback_address(host) is loopback


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_token_bucket_retry_after() -> None:
    clock = FakeClock()
    limiter = TokenBucketLimiter(60, clock=clock)  # one per second, burst of 60
    assert all(limiter.acquire("a") == 0.0 for _ in range(60))
    wait = limiter.acquire("a")
    assert wait == pytest.approx(1.0)
    assert limiter.acquire("b") == 0.0  # keys are independent
    clock.now += 0.5
    assert limiter.acquire("a") == pytest.approx(0.5)
    clock.now += 0.5
    assert limiter.acquire("a") == 0.0
    assert TokenBucketLimiter(0).acquire("x") == 0.0  # 0 disables


@settings(max_examples=60, deadline=None)
@given(
    per_minute=st.integers(min_value=1, max_value=600),
    gaps=st.lists(st.floats(min_value=0.0, max_value=5.0), min_size=1, max_size=300),
)
def test_token_bucket_never_exceeds_budget(per_minute: int, gaps: list[float]) -> None:
    """Over any run, allowed requests ≤ burst + rate × elapsed time."""
    clock = FakeClock()
    limiter = TokenBucketLimiter(per_minute, clock=clock)
    allowed = 0
    for gap in gaps:
        clock.now += gap
        if limiter.acquire("k") == 0.0:
            allowed += 1
    elapsed = clock.now - 1000.0
    assert allowed <= per_minute + per_minute / 60.0 * elapsed + 1e-9
