"""Signing in and out, shared by the HTML form (/login) and the API (/api/v1/auth/login).

Order of a sign-in: refuse when the cookie could not be kept (plain HTTP from another machine with Secure
cookies, see app.auth.sessions), then the throttle (app.auth.throttle, per account and client address), then
the password. Success clears the throttle record; a wrong password counts a failure.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from sqlmodel import Session
from starlette.requests import HTTPConnection
from starlette.responses import Response

from app.auth import sessions
from app.auth.clientaddr import client_address
from app.auth.throttle import LoginThrottler, throttle_key
from app.auth.users import authenticate, revoke_sessions
from app.models.auth import UserAccount
from app.settings import Settings


@dataclass(frozen=True)
class SignInOutcome:
    user: UserAccount | None = None
    retry_after_s: int = 0  # > 0: throttled, try again in this many whole seconds
    needs_tls: bool = False  # the session cookie would be dropped by the browser

    @property
    def throttled(self) -> bool:
        return self.retry_after_s > 0


def throttler_of(conn: HTTPConnection) -> LoginThrottler:
    throttle = getattr(conn.app.state, "login_throttle", None)
    return throttle if isinstance(throttle, LoginThrottler) else LoginThrottler()


def attempt_sign_in(
    session: Session, conn: HTTPConnection, settings: Settings, email: str, password: str
) -> SignInOutcome:
    if sessions.cookie_needs_tls(conn, settings):
        return SignInOutcome(needs_tls=True)
    throttle = throttler_of(conn)
    key = throttle_key(email, client_address(conn, settings))
    wait = throttle.retry_after(session, key)
    if wait > 0:
        return SignInOutcome(retry_after_s=max(1, math.ceil(wait)))
    user = authenticate(session, email, password)
    if user is None:
        throttle.record_failure(session, key)
        return SignInOutcome()
    throttle.clear(session, key)
    session.refresh(user)  # loaded again after the commit, so the caller may use it once the session closes
    return SignInOutcome(user=user)


def start_session(response: Response, conn: HTTPConnection, settings: Settings, user: UserAccount) -> str:
    """Session cookies for `user` at its current session version; returns the CSRF token."""
    return sessions.set_session_cookies(response, conn, settings, user.id, user.session_version)


def end_session(session: Session, response: Response, conn: HTTPConnection, settings: Settings) -> None:
    """Sign out: every cookie of this user stops working (not only this browser's), and this one is deleted."""
    data = sessions.read_session(conn, settings.secret_key)
    if data is not None:
        user = session.get(UserAccount, data.user_id)
        if user is not None and user.session_version == data.version:
            revoke_sessions(session, user.id)
    sessions.clear_session_cookies(response, conn, settings)
