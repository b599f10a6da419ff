"""User accounts: create, find, authenticate by e-mail and password."""

from __future__ import annotations

import re

from sqlalchemy import func
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from app.auth.passwords import hash_password, needs_rehash, verify_password
from app.models.auth import UserAccount

# Deliberately loose: one @, something on each side, a dot in the domain, no spaces.
_EMAIL_RE = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")


def normalise_email(email: str) -> str:
    email = email.strip().lower()
    if len(email) > 320 or not _EMAIL_RE.match(email):
        raise ValueError(f"not a valid e-mail address: {email[:80]!r}")
    return email


class UserExistsError(ValueError):
    pass


def find_user(session: Session, email: str) -> UserAccount | None:
    try:
        email = normalise_email(email)
    except ValueError:
        return None
    return session.exec(select(UserAccount).where(UserAccount.email == email)).first()


def create_user(session: Session, email: str, password: str, is_admin: bool = False) -> UserAccount:
    """Create an account; raises ValueError for a bad e-mail/password, UserExistsError for a taken e-mail."""
    email = normalise_email(email)
    if find_user(session, email) is not None:
        raise UserExistsError(f"a user with e-mail {email} already exists")
    user = UserAccount(email=email, password_hash=hash_password(password), is_admin=is_admin)
    session.add(user)
    try:
        session.commit()
    except IntegrityError as exc:  # a concurrent create of the same e-mail
        session.rollback()
        raise UserExistsError(f"a user with e-mail {email} already exists") from exc
    session.refresh(user)
    return user


def authenticate(session: Session, email: str, password: str) -> UserAccount | None:
    """The active user with this e-mail and password, or None (same work whether or not the e-mail exists)."""
    user = find_user(session, email)
    if not verify_password(user.password_hash if user else None, password):
        return None
    assert user is not None
    if not user.is_active:
        return None
    if needs_rehash(user.password_hash):
        user.password_hash = hash_password(password)
        session.add(user)
        session.commit()
        session.refresh(user)
    return user


def list_users(session: Session, offset: int = 0, limit: int = 100) -> tuple[list[UserAccount], int]:
    rows = list(
        session.exec(select(UserAccount).order_by(col(UserAccount.email)).offset(offset).limit(limit))
    )
    total = session.exec(select(func.count()).select_from(UserAccount)).one()
    return rows, total
