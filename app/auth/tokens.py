"""Personal API tokens: `cpt_` + 43 url-safe characters (256 random bits), shown once, SHA-256 at rest.

A fast unsalted hash is enough here (unlike passwords): the secret is 256 random bits, so there is nothing
to brute-force, and a lookup by hash must stay cheap on every API call. The stored `prefix` (first 12
characters) lets a user recognise a token in lists and in logs without revealing it.
"""

from __future__ import annotations

import hashlib
import secrets
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import func
from sqlmodel import Session, col, select

from app.models.auth import ApiToken, UserAccount
from app.models.base import as_utc, utcnow

TOKEN_PREFIX = "cpt_"
# One-time sign-in links (app.auth.bootstrap) share the table but never authenticate an API call.
LINK_TOKEN_PREFIX = "cpl_"
DISPLAY_PREFIX_CHARS = 12
MAX_TOKEN_DAYS = 3650
# last_used_at is refreshed at most this often, so busy scripts don't turn every read into a write.
LAST_USED_RESOLUTION_S = 60.0

SCOPES = ("plans:read", "plans:write", "benchmarks:run", "admin")
# A scope also grants the ones listed here.
SCOPE_IMPLIES: dict[str, frozenset[str]] = {
    "admin": frozenset(SCOPES),
    "plans:write": frozenset({"plans:read"}),
}


def expand_scopes(scopes: frozenset[str] | set[str] | list[str] | tuple[str, ...]) -> frozenset[str]:
    granted: set[str] = set()
    for scope in scopes:
        granted.add(scope)
        granted |= SCOPE_IMPLIES.get(scope, frozenset())
    return frozenset(granted)


def user_scopes(user: UserAccount) -> frozenset[str]:
    """Everything a signed-in user may do; `admin` only for administrators."""
    return expand_scopes(["admin"]) if user.is_admin else frozenset(s for s in SCOPES if s != "admin")


def hash_token(plaintext: str) -> str:
    return hashlib.sha256(plaintext.encode()).hexdigest()


def looks_like_token(value: str) -> bool:
    return value.startswith(TOKEN_PREFIX) and 20 <= len(value) <= 200


def parse_scopes(scopes: list[str] | tuple[str, ...] | str) -> list[str]:
    """Normalise and validate requested scopes; raises ValueError naming the unknown ones."""
    items = scopes.replace(",", " ").split() if isinstance(scopes, str) else [s.strip() for s in scopes]
    unknown = sorted({s for s in items if s not in SCOPES})
    if unknown:
        raise ValueError(f"unknown scope(s) {', '.join(unknown)}; choose from {', '.join(SCOPES)}")
    if not items:
        raise ValueError(f"at least one scope is required; choose from {', '.join(SCOPES)}")
    return [s for s in SCOPES if s in set(items)]


@dataclass(frozen=True)
class IssuedToken:
    token: ApiToken
    plaintext: str  # returned to the user once, never stored


def create_token(
    session: Session,
    user: UserAccount,
    name: str,
    scopes: list[str] | tuple[str, ...] | str,
    expires_in_days: int | None = 90,
    allowed: frozenset[str] | None = None,
    not_after: datetime | None = None,
) -> IssuedToken:
    """Issue a token for `user`. `allowed` caps the scopes (a token may not grant more than its maker holds);
    `not_after` caps the expiry (a token made through another expires no later than it, see expiry_limit):
    a longer lifetime, or none, is shortened to it."""
    wanted = parse_scopes(scopes)
    ceiling = user_scopes(user) if allowed is None else user_scopes(user) & allowed
    refused = [s for s in wanted if s not in ceiling]
    if refused:
        raise PermissionError(f"cannot grant scope(s) {', '.join(refused)}")
    name = name.strip()
    if not name or len(name) > 200:
        raise ValueError("token name must have 1 to 200 characters")
    if expires_in_days is not None and not 1 <= expires_in_days <= MAX_TOKEN_DAYS:
        raise ValueError(f"expires_in_days must be between 1 and {MAX_TOKEN_DAYS}")
    plaintext = TOKEN_PREFIX + secrets.token_urlsafe(32)
    row = ApiToken(
        user_id=user.id,
        name=name,
        prefix=plaintext[:DISPLAY_PREFIX_CHARS],
        token_hash=hash_token(plaintext),
        scopes=" ".join(wanted),
        expires_at=capped_expiry(expires_in_days, not_after),
    )
    session.add(row)
    session.commit()
    session.refresh(row)
    return IssuedToken(token=row, plaintext=plaintext)


def capped_expiry(expires_in_days: int | None, not_after: datetime | None) -> datetime | None:
    """When a token asked to live `expires_in_days` (None: forever) expires, at the latest at `not_after`."""
    wanted = None if expires_in_days is None else utcnow() + timedelta(days=expires_in_days)
    if not_after is None:
        return wanted
    return not_after if wanted is None else min(wanted, not_after)


def expiry_limit(session: Session, presenting_token_id: uuid.UUID | None) -> datetime | None:
    """The latest expiry of a token made through the API token `presenting_token_id`: that token's own, so a
    leaked short-lived token cannot mint a longer-lived one. None (no cap) for a cookie session (no presenting
    token) or a presenting token that never expires."""
    if presenting_token_id is None:
        return None
    row = session.get(ApiToken, presenting_token_id)
    return None if row is None else as_utc(row.expires_at)


def may_revoke(
    token: ApiToken, presenting_token_id: uuid.UUID | None, presenting_scopes: frozenset[str]
) -> bool:
    """Whether the caller may revoke `token`: a cookie session (no presenting token) manages all its user's
    tokens; an API token may revoke itself, and other tokens only when it holds every scope they have (a
    plans:read token cannot revoke a plans:write one)."""
    if presenting_token_id is None or token.id == presenting_token_id:
        return True
    return expand_scopes(token_scopes(token)) <= presenting_scopes


def revoke_refusal(token: ApiToken, presenting_scopes: frozenset[str]) -> str:
    """The 403 message when an API token may not revoke `token` (may_revoke)."""
    missing = sorted(expand_scopes(token_scopes(token)) - presenting_scopes)
    return (
        f"this API token cannot revoke token {token.prefix}…: it lacks that token's scope(s) "
        f"{', '.join(missing)}; revoke it from a signed-in browser session or with a token that holds them"
    )


def token_scopes(token: ApiToken) -> frozenset[str]:
    return frozenset(token.scopes.split())


def is_expired(token: ApiToken, now: datetime | None = None) -> bool:
    expires = as_utc(token.expires_at)
    return expires is not None and expires <= (now or utcnow())


@dataclass(frozen=True)
class TokenIdentity:
    token_id: uuid.UUID
    user_id: uuid.UUID
    email: str
    scopes: frozenset[str]  # effective: the token's scopes within what its user may do today
    use_unrecorded: bool = False  # last_used_at is older than LAST_USED_RESOLUTION_S and was not refreshed


def authenticate_token(session: Session, plaintext: str, record_use: bool = True) -> TokenIdentity | None:
    """The identity behind a presented token, or None if unknown, revoked, expired or its user is inactive.

    With `record_use=False` nothing is written (a read-only session will do); `use_unrecorded` then says
    whether the caller should `record_token_use` in a writable one.
    """
    if not looks_like_token(plaintext):
        return None
    row = session.exec(select(ApiToken).where(ApiToken.token_hash == hash_token(plaintext))).first()
    if row is None or row.revoked_at is not None or is_expired(row):
        return None
    user = session.get(UserAccount, row.user_id)
    if user is None or not user.is_active:
        return None
    last = as_utc(row.last_used_at)
    stale = last is None or (utcnow() - last).total_seconds() >= LAST_USED_RESOLUTION_S
    identity = TokenIdentity(
        token_id=row.id,
        user_id=user.id,
        email=user.email,
        scopes=expand_scopes(token_scopes(row)) & user_scopes(user),
        use_unrecorded=stale and not record_use,
    )
    if stale and record_use:
        record_token_use(session, row.id)
    return identity


def record_token_use(session: Session, token_id: uuid.UUID) -> None:
    row = session.get(ApiToken, token_id)
    if row is not None:
        row.last_used_at = utcnow()
        session.add(row)
        session.commit()


def list_tokens(
    session: Session, user_id: uuid.UUID, offset: int = 0, limit: int = 100
) -> tuple[list[ApiToken], int]:
    """A user's personal API tokens, newest first (one-time sign-in links are not listed)."""
    mine = (ApiToken.user_id == user_id, ~col(ApiToken.prefix).startswith(LINK_TOKEN_PREFIX))
    query = select(ApiToken).where(*mine)
    rows = list(session.exec(query.order_by(col(ApiToken.created_at).desc()).offset(offset).limit(limit)))
    total = session.exec(select(func.count()).select_from(ApiToken).where(*mine)).one()
    return rows, total


def revoke_token(session: Session, token: ApiToken) -> ApiToken:
    if token.revoked_at is None:
        token.revoked_at = utcnow()
        session.add(token)
        session.commit()
        session.refresh(token)
    return token
