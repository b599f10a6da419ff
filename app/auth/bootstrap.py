"""First run without an account: a one-time sign-in link for a bootstrap administrator (as Jupyter does).

While no active administrator can sign in with a password, `clusterplan serve` makes sure the account
`admin@localhost` exists (administrator, no usable password) and prints a link carrying a fresh one-time
token. Opening it signs that browser in and leads to a page that asks for a password (and, if wanted, another
e-mail address); from then on the account signs in like any other and no link is printed again.

The token is stored like an API token (SHA-256 in `api_token`, app.auth.tokens.hash_token) but with its own
prefix `cpl_` and no scopes, so it can never authenticate an API call; it works once (an atomic update marks it
used, so two workers cannot both accept it) and only for `LINK_LIFETIME`. Each start revokes the links printed
before and issues a new one, so the link in the newest log is the only one that works.
"""

from __future__ import annotations

import secrets
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import CursorResult, update
from sqlmodel import Session, col, select

from app.auth.tokens import DISPLAY_PREFIX_CHARS, LINK_TOKEN_PREFIX, hash_token
from app.auth.users import claim_plan_invites, find_user, has_usable_password, normalise_email
from app.models.auth import ApiToken, UserAccount
from app.models.base import as_utc, utcnow

BOOTSTRAP_EMAIL = "admin@localhost"
# Not an Argon2 hash, so no password ever matches it (the "!" of /etc/shadow for a locked password).
NO_PASSWORD = "!"
LINK_PREFIX = LINK_TOKEN_PREFIX
LINK_NAME = "one-time sign-in link"
# Long enough to read the terminal and open a browser after a coffee; a restart prints a new one.
LINK_LIFETIME = timedelta(hours=1)
LINK_PATH = "/login/link"


def password_admin_exists(session: Session) -> bool:
    """Some active administrator can sign in with a password (then no link is needed)."""
    admins = session.exec(
        select(UserAccount).where(col(UserAccount.is_admin).is_(True), col(UserAccount.is_active).is_(True))
    )
    return any(has_usable_password(user) for user in admins)


def ensure_bootstrap_admin(session: Session) -> UserAccount:
    """The first-run administrator, created (or re-enabled) without a usable password."""
    user = find_user(session, BOOTSTRAP_EMAIL)
    if user is None:
        user = UserAccount(email=normalise_email(BOOTSTRAP_EMAIL), password_hash=NO_PASSWORD, is_admin=True)
    user.is_admin = True
    user.is_active = True
    session.add(user)
    session.flush()
    claim_plan_invites(session, user)
    session.commit()
    session.refresh(user)
    return user


def issue_link_token(session: Session, user: UserAccount, now: datetime | None = None) -> str:
    """A fresh one-time token for `user`; every earlier unused link of theirs is revoked."""
    now = now or utcnow()
    session.execute(
        update(ApiToken)
        .where(
            col(ApiToken.user_id) == user.id,
            col(ApiToken.prefix).startswith(LINK_PREFIX),
            col(ApiToken.revoked_at).is_(None),
        )
        .values(revoked_at=now)
    )
    plaintext = LINK_PREFIX + secrets.token_urlsafe(32)
    session.add(
        ApiToken(
            user_id=user.id,
            name=LINK_NAME,
            prefix=plaintext[:DISPLAY_PREFIX_CHARS],
            token_hash=hash_token(plaintext),
            scopes="",
            expires_at=now + LINK_LIFETIME,
        )
    )
    session.commit()
    return plaintext


def first_run_link(session: Session, base_url: str) -> str | None:
    """The sign-in URL to print at start-up, or None when an administrator with a password exists."""
    if password_admin_exists(session):
        return None
    token = issue_link_token(session, ensure_bootstrap_admin(session))
    return f"{base_url.rstrip('/')}{LINK_PATH}?token={token}"


def consume_link_token(session: Session, plaintext: str, now: datetime | None = None) -> UserAccount | None:
    """The account a valid, unused, unexpired link token belongs to (and the token is used up), else None."""
    if not plaintext.startswith(LINK_PREFIX) or len(plaintext) > 200:
        return None
    now = now or utcnow()
    row = session.exec(select(ApiToken).where(ApiToken.token_hash == hash_token(plaintext))).first()
    expires = as_utc(row.expires_at) if row is not None else None
    if row is None or row.revoked_at is not None or expires is None or expires <= now:
        return None
    used: CursorResult[Any] = session.execute(  # type: ignore[assignment]  # an UPDATE: a cursor result
        update(ApiToken)
        .where(col(ApiToken.id) == row.id, col(ApiToken.revoked_at).is_(None))
        .values(revoked_at=now)
    )
    session.commit()
    if used.rowcount != 1:  # another request (or worker) used it first
        return None
    user = session.get(UserAccount, row.user_id)
    return user if user is not None and user.is_active else None


def is_link_token(token: ApiToken) -> bool:
    return token.prefix.startswith(LINK_PREFIX)
