"""Browser sessions: a signed cookie (itsdangerous) plus CSRF protection for cookie-authenticated writes.

Cookies
- `cp_session`: signed, timestamped {user id, CSRF token}; HttpOnly, SameSite=Lax, Path=/, Secure unless the
  request is a direct loopback one (plain http://127.0.0.1 must keep working for the first-run path).
- `cp_csrf`: the same CSRF token, readable by our own JavaScript (not HttpOnly), SameSite=Strict.

How the CSRF token travels (double submit): pages carry it in `<meta name="csrf-token">` (and the `cp_csrf`
cookie); static/js/csrf.js copies it into the `X-CSRF-Token` header of every htmx request; plain HTML forms
post it in a hidden `csrf_token` field. A cookie-authenticated unsafe request is accepted when that token
matches the one sealed in the signed session, or when the browser itself vouches for it being same-origin
(`Sec-Fetch-Site: same-origin`, or an `Origin` equal to the server's own origin). Anything else gets 403.
"""

from __future__ import annotations

import hmac
import ipaddress
import secrets
import uuid
from dataclasses import dataclass

from itsdangerous import BadSignature, URLSafeTimedSerializer
from starlette.requests import HTTPConnection
from starlette.responses import Response

SESSION_COOKIE = "cp_session"
CSRF_COOKIE = "cp_csrf"
CSRF_HEADER = "X-CSRF-Token"
CSRF_FORM_FIELD = "csrf_token"
SESSION_MAX_AGE_S = 14 * 24 * 3600
_SALT = "clusterplan.session.v1"

# Headers a reverse proxy adds: a loopback peer that forwards someone else's request is not the local user.
FORWARDING_HEADERS = ("forwarded", "x-forwarded-for", "x-forwarded-host", "x-real-ip")
# Starlette's TestClient reports this peer/host; it can never be a real socket address.
_TEST_CLIENT_NAMES = {"testclient", "testserver"}
_LOOPBACK_NAMES = {"localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback"}


@dataclass(frozen=True)
class SessionData:
    user_id: uuid.UUID
    csrf_token: str


def _serializer(secret_key: str) -> URLSafeTimedSerializer:
    return URLSafeTimedSerializer(secret_key, salt=_SALT)


def encode_session(secret_key: str, data: SessionData) -> str:
    return _serializer(secret_key).dumps({"uid": str(data.user_id), "csrf": data.csrf_token})


def decode_session(secret_key: str, value: str | None) -> SessionData | None:
    """The session in a cookie value, or None when it is missing, tampered with, expired or malformed."""
    if not value or len(value) > 4096:
        return None
    try:
        payload = _serializer(secret_key).loads(value, max_age=SESSION_MAX_AGE_S)
        return SessionData(user_id=uuid.UUID(str(payload["uid"])), csrf_token=str(payload["csrf"]))
    except (BadSignature, KeyError, TypeError, ValueError):
        return None


def is_loopback_address(host: str | None) -> bool:
    """True for 127.0.0.0/8, ::1, 'localhost' and the TestClient's pseudo address."""
    if not host:
        return False
    host = host.strip().strip("[]").lower()
    if host in _LOOPBACK_NAMES or host in _TEST_CLIENT_NAMES or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _host_without_port(host_header: str) -> str:
    if host_header.startswith("["):
        return host_header[1 : host_header.find("]")] if "]" in host_header else host_header
    return host_header.rsplit(":", 1)[0] if host_header.count(":") == 1 else host_header


def is_direct_loopback(conn: HTTPConnection) -> bool:
    """The request comes straight from this machine: loopback peer, loopback Host, no proxy headers.

    The Host check defeats DNS rebinding (a page on evil.example resolved to 127.0.0.1 sends
    `Host: evil.example`); the proxy-header check stops a same-host reverse proxy from turning every
    remote visitor into the local user.
    """
    client = conn.client
    if client is None or not is_loopback_address(client.host):
        return False
    if any(name in conn.headers for name in FORWARDING_HEADERS):
        return False
    return is_loopback_address(_host_without_port(conn.headers.get("host", "")))


def cookie_secure(conn: HTTPConnection) -> bool:
    return conn.url.scheme == "https" or not is_direct_loopback(conn)


def new_csrf_token() -> str:
    return secrets.token_urlsafe(32)


def set_session_cookies(response: Response, conn: HTTPConnection, secret_key: str, user_id: uuid.UUID) -> str:
    """Start a session for `user_id` on `response`; returns the new CSRF token."""
    data = SessionData(user_id=user_id, csrf_token=new_csrf_token())
    secure = cookie_secure(conn)
    response.set_cookie(
        SESSION_COOKIE,
        encode_session(secret_key, data),
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


def clear_session_cookies(response: Response, conn: HTTPConnection) -> None:
    secure = cookie_secure(conn)
    response.delete_cookie(SESSION_COOKIE, path="/", httponly=True, samesite="lax", secure=secure)
    response.delete_cookie(CSRF_COOKIE, path="/", samesite="strict", secure=secure)


def read_session(conn: HTTPConnection, secret_key: str) -> SessionData | None:
    return decode_session(secret_key, conn.cookies.get(SESSION_COOKIE))


def tokens_match(expected: str | None, presented: str | None) -> bool:
    if not expected or not presented:
        return False
    return hmac.compare_digest(expected.encode(), presented.encode())


def browser_origin_verdict(conn: HTTPConnection) -> bool | None:
    """What the browser says about where an unsafe request comes from.

    True: same origin (Sec-Fetch-Site: same-origin, or Origin equal to ours). False: another site, a sibling
    subdomain, or an opaque origin. None: the client sent neither header (curl, scripts, old browsers).
    """
    fetch_site = conn.headers.get("sec-fetch-site")
    if fetch_site is not None:
        return fetch_site.strip().lower() == "same-origin"
    origin = conn.headers.get("origin")
    if origin is not None:
        own = f"{conn.url.scheme}://{conn.headers.get('host', '')}".lower()
        return origin.strip().lower() == own
    return None
