"""User accounts: create, find, authenticate by e-mail and password, change passwords, revoke sessions."""

from __future__ import annotations

import re
import uuid

from sqlalchemy import func, update
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from app.auth.passwords import hash_password, needs_rehash, verify_password
from app.core.errors import Problem, SpecError
from app.models.auth import UserAccount
from app.models.plans import PlanInvite, PlanShare

# Deliberately loose: one @, something on each side, a dot in the domain (or the name `localhost`, RFC 6761,
# for the first-run account admin@localhost), no spaces.
_EMAIL_RE = re.compile(r"^[^@\s]+@([^@\s]+\.[^@\s]+|localhost)$")
# Argon2 hashes (PHC string format) start so; anything else ("!" for the first-run account) matches nothing.
_PASSWORD_HASH_PREFIX = "$argon2"


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
        session.flush()
        claim_plan_invites(session, user)
        session.commit()
    except IntegrityError as exc:  # a concurrent create of the same e-mail
        session.rollback()
        raise UserExistsError(f"a user with e-mail {email} already exists") from exc
    session.refresh(user)
    return user


def claim_plan_invites(session: Session, user: UserAccount) -> int:
    """Turn the plans shared with the user's e-mail before the account existed into shares of the account
    (in the caller's transaction); the number claimed."""
    invites = list(session.exec(select(PlanInvite).where(PlanInvite.email == user.email)))
    for invite in invites:
        session.add(PlanShare(plan_id=invite.plan_id, user_id=user.id))
        session.delete(invite)
    return len(invites)


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


def has_usable_password(user: UserAccount) -> bool:
    """False for an account that cannot sign in with a password (the first-run administrator before setup)."""
    return user.password_hash.startswith(_PASSWORD_HASH_PREFIX)


def revoke_sessions(session: Session, user_id: uuid.UUID) -> None:
    """Bump the account's session_version: every session cookie issued so far stops working, everywhere."""
    statement = (
        update(UserAccount)
        .where(col(UserAccount.id) == user_id)
        .values(session_version=UserAccount.session_version + 1)  # type: ignore[operator]
    )
    session.execute(statement)
    session.commit()


def set_password(session: Session, user: UserAccount, password: str) -> UserAccount:
    """A new password (policy-checked; raises ValueError) and the end of every existing session."""
    user.password_hash = hash_password(password)
    session.add(user)
    session.commit()
    revoke_sessions(session, user.id)
    session.refresh(user)
    return user


def set_active(session: Session, user: UserAccount, active: bool) -> UserAccount:
    """Deactivate (sessions revoked; tokens stop working as their owner is inactive) or re-activate."""
    user.is_active = active
    session.add(user)
    session.commit()
    if not active:
        revoke_sessions(session, user.id)
    session.refresh(user)
    return user


def change_email(session: Session, user: UserAccount, email: str, *, by_admin: bool) -> UserAccount:
    """Move the account to another e-mail; raises SpecError on `email` (bad address, or a change this caller may
    not make) or UserExistsError (taken).

    Plans shared by address reach whoever holds the address, and nothing here proves that the holder owns it
    (no mail is sent), so only an administrator (`by_admin`: the caller holds the admin scope) may move an account
    to another address. An address with pending plan invitations is refused to everyone: it would claim plans
    shared with someone else; an administrator creates that person's account instead, which claims them."""
    try:
        email = normalise_email(email)
    except ValueError as exc:
        raise SpecError([Problem("email", str(exc))]) from None
    if email == user.email:
        return user
    if not by_admin:
        raise SpecError(
            [
                Problem(
                    "email",
                    "only an administrator can change an account's e-mail address (plans shared by address "
                    "reach whoever holds it); ask one to",
                )
            ]
        )
    if find_user(session, email) is not None:
        raise UserExistsError(f"a user with e-mail {email} already exists")
    if session.exec(select(PlanInvite.id).where(PlanInvite.email == email)).first() is not None:
        raise SpecError(
            [
                Problem(
                    "email",
                    f"{email} has plans shared with it by invitation; create that account "
                    "(clusterplan users create) rather than moving this one to it",
                )
            ]
        )
    user.email = email
    session.add(user)
    try:
        session.commit()
    except IntegrityError as exc:
        session.rollback()
        raise UserExistsError(f"a user with e-mail {email} already exists") from exc
    session.refresh(user)
    return user
