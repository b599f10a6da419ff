"""Browser sessions: a signed cookie (itsdangerous) plus CSRF protection for cookie-authenticated writes.

Cookies
- `cp_session`: signed, timestamped {user id, session version, CSRF token}; HttpOnly, SameSite=Lax, Path=/.
  The session version is the account's `session_version` when the cookie was issued: signing out, changing
  the password and deactivation bump it, which revokes every cookie of that user in every browser at once.
- `cp_csrf`: the same CSRF token, readable by our own JavaScript (not HttpOnly), SameSite=Strict.

Both are `Secure` when the site runs over TLS (`CLUSTERPLAN_HTTPS=true`, or https as seen through a trusted
proxy). Over plain HTTP they are not Secure for a client on this machine (loopback never leaves the host) or
when `CLUSTERPLAN_INSECURE_COOKIES=true` (a LAN without TLS); for anyone else they would be Secure, a browser
would drop them, and the sign-in routes say so instead (`cookie_needs_tls`).

How the CSRF token travels (double submit): pages carry it in `<meta name="csrf-token">` (and the `cp_csrf`
cookie); static/js/csrf.js copies it into the `X-CSRF-Token` header of every htmx request; plain HTML forms
post it in a hidden `csrf_token` field. A cookie-authenticated unsafe request is accepted when that token
matches the one sealed in the signed session, or when the browser itself vouches for it being same-origin
(`Sec-Fetch-Site: same-origin`, or an `Origin` equal to the server's own origin). Anything else gets 403.
"""

from __future__ import annotations

import hmac
import secrets
import uuid
from dataclasses import dataclass

from itsdangerous import BadSignature, URLSafeTimedSerializer
from starlette.requests import HTTPConnection
from starlette.responses import Response

from app.auth.clientaddr import is_loopback_client, request_origin, request_scheme
from app.settings import Settings

SESSION_COOKIE = "cp_session"
CSRF_COOKIE = "cp_csrf"
CSRF_HEADER = "X-CSRF-Token"
CSRF_FORM_FIELD = "csrf_token"
SESSION_MAX_AGE_S = 14 * 24 * 3600
_SALT = "clusterplan.session.v1"

COOKIE_NEEDS_TLS = (
    "sign-in needs HTTPS here: the session cookie is Secure, so a browser drops it over plain HTTP. Serve "
    "the site over TLS (a TLS proxy listed in CLUSTERPLAN_TRUSTED_PROXIES, and CLUSTERPLAN_HTTPS=true), or, "
    "on a trusted network without TLS, set CLUSTERPLAN_INSECURE_COOKIES=true"
)


@dataclass(frozen=True)
class SessionData:
    user_id: uuid.UUID
    csrf_token: str
    version: int  # the account's session_version when the cookie was issued


def _serializer(secret_key: str) -> URLSafeTimedSerializer:
    return URLSafeTimedSerializer(secret_key, salt=_SALT)


def encode_session(secret_key: str, data: SessionData) -> str:
    payload = {"uid": str(data.user_id), "csrf": data.csrf_token, "ver": data.version}
    return _serializer(secret_key).dumps(payload)


def decode_session(secret_key: str, value: str | None) -> SessionData | None:
    """The session in a cookie value, or None when it is missing, tampered with, expired or malformed."""
    if not value or len(value) > 4096:
        return None
    try:
        payload = _serializer(secret_key).loads(value, max_age=SESSION_MAX_AGE_S)
        return SessionData(
            user_id=uuid.UUID(str(payload["uid"])),
            csrf_token=str(payload["csrf"]),
            version=int(payload["ver"]),
        )
    except (BadSignature, KeyError, TypeError, ValueError):
        return None


def cookie_secure(conn: HTTPConnection, settings: Settings) -> bool:
    """Whether session cookies carry the Secure attribute (see the module docstring)."""
    if settings.https or request_scheme(conn, settings) == "https":
        return True
    return not (settings.insecure_cookies or is_loopback_client(conn, settings))


def cookie_needs_tls(conn: HTTPConnection, settings: Settings) -> bool:
    """A session cookie set now would be Secure on a plain-HTTP page: the browser would silently drop it."""
    return not settings.https and request_scheme(conn, settings) == "http" and cookie_secure(conn, settings)


def new_csrf_token() -> str:
    return secrets.token_urlsafe(32)


def set_session_cookies(
    response: Response, conn: HTTPConnection, settings: Settings, user_id: uuid.UUID, version: int
) -> str:
    """Start a session for `user_id` (at its current `session_version`) on `response`; returns the CSRF token."""
    data = SessionData(user_id=user_id, csrf_token=new_csrf_token(), version=version)
    secure = cookie_secure(conn, settings)
    response.set_cookie(
        SESSION_COOKIE,
        encode_session(settings.secret_key, data),
        max_age=SESSION_MAX_AGE_S,
        path="/",
        httponly=True,
        samesite="lax",
        secure=secure,
    )
    response.set_cookie(
        CSRF_COOKIE,
        data.csrf_token,
        max_age=SESSION_MAX_AGE_S,
        path="/",
        httponly=False,
        samesite="strict",
        secure=secure,
    )
    return data.csrf_token


def clear_session_cookies(response: Response, conn: HTTPConnection, settings: Settings) -> None:
    secure = cookie_secure(conn, settings)
    response.delete_cookie(SESSION_COOKIE, path="/", httponly=True, samesite="lax", secure=secure)
    response.delete_cookie(CSRF_COOKIE, path="/", samesite="strict", secure=secure)


def read_session(conn: HTTPConnection, secret_key: str) -> SessionData | None:
    return decode_session(secret_key, conn.cookies.get(SESSION_COOKIE))


def tokens_match(expected: str | None, presented: str | None) -> bool:
    if not expected or not presented:
        return False
    return hmac.compare_digest(expected.encode(), presented.encode())


def browser_origin_verdict(conn: HTTPConnection, settings: Settings | None = None) -> bool | None:
    """What the browser says about where an unsafe request comes from.

    True: same origin (Sec-Fetch-Site: same-origin, or Origin equal to ours). False: another site, a sibling
    subdomain, or an opaque origin. None: the client sent neither header (curl, scripts, old browsers).
    """
    fetch_site = conn.headers.get("sec-fetch-site")
    if fetch_site is not None:
        return fetch_site.strip().lower() == "same-origin"
    origin = conn.headers.get("origin")
    if origin is not None:
        return origin.strip().lower() == request_origin(conn, settings)
    return None
