"""Authorisation dependencies used by every route.

`require_scope(scope)` is the one way a route states what it needs. Scopes: plans:read, plans:write,
benchmarks:run, admin (admin implies every scope, plans:write implies plans:read). Reads of public catalog
data and pure calculations need no scope.

Who the caller is (`current_principal`), in this order:
1. `Authorization: Bearer cpt_…` (a personal API token) or `Bearer cpn_…` (a node agent's token); a bad,
   expired or revoked one, or any other Authorization header, is a 401 — on every route, public ones
   included (app.hooks.security checks the header before routing), never a silent fall-back to anonymous.
2. the signed `cp_session` cookie of a signed-in browser user, valid while its session version is the
   account's (signing out, a new password or deactivation revoke every cookie of that user).
3. nobody: anonymous, with no scopes. There is no anonymous administrator, not even on loopback; the first
   run signs in through a one-time link instead (app.auth.bootstrap).

Unsafe methods (POST, PUT, PATCH, DELETE) authenticated by cookie must also pass the CSRF check of
app.auth.sessions; bearer tokens are never sent by a browser on its own, so they need none.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, cast

from fastapi import Depends, HTTPException, Request
from sqlmodel import Session

from app.auth import sessions
from app.auth.nodes import NODE_TOKEN_PREFIX, authenticate_node_token
from app.auth.tokens import SCOPES, TOKEN_PREFIX, authenticate_token, record_token_use, user_scopes
from app.db import get_engine, get_read_engine
from app.models.auth import UserAccount
from app.settings import Settings, get_settings

__all__ = [
    "PROFILE_SCOPE",
    "SCOPES",
    "AuthenticationRequired",
    "Principal",
    "check_profile_use",
    "check_profiles_in",
    "current_principal",
    "fresh_principal",
    "may_use_profiles",
    "profile_named",
    "require_browser_session",
    "require_scope",
    "require_user",
]

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "TRACE"})


@dataclass(frozen=True)
class Principal:
    """Who is calling: a user (cookie or token), a node agent, or anonymous."""

    kind: str  # "user" | "token" | "node" | "anonymous"
    user_id: Any = None
    node_id: Any = None
    scopes: frozenset[str] = frozenset()
    email: str | None = None
    token_id: Any = None
    via: str = "none"  # "cookie" | "token" | "node-token" | "none"
    csrf_token: str | None = None  # the cookie session's CSRF token

    @property
    def is_authenticated(self) -> bool:
        return self.kind in ("user", "token", "node")

    def has(self, scope: str) -> bool:
        return scope in self.scopes


class AuthenticationRequired(HTTPException):
    """401 for the API; the security hook turns it into a redirect to /login for browser page requests."""

    def __init__(self, detail: str = "authentication required") -> None:
        super().__init__(status_code=401, detail=detail, headers={"WWW-Authenticate": "Bearer"})


def _settings(request: Request) -> Settings:
    return getattr(request.app.state, "settings", None) or get_settings()


ANONYMOUS = Principal(kind="anonymous")


def _principal_from_token(credential: str) -> Principal:
    # Read-only first (on SQLite it never waits for the write lock); the last-used time is written at most
    # once a minute per token (app.auth.tokens.LAST_USED_RESOLUTION_S).
    with Session(get_read_engine()) as session:
        identity = authenticate_token(session, credential, record_use=False)
    if identity is None:
        raise AuthenticationRequired("invalid, expired or revoked API token")
    if identity.use_unrecorded:
        with Session(get_engine()) as session:
            record_token_use(session, identity.token_id)
    return Principal(
        kind="token",
        user_id=identity.user_id,
        email=identity.email,
        scopes=identity.scopes,
        token_id=identity.token_id,
        via="token",
    )


def _principal_from_node_token(credential: str) -> Principal:
    with Session(get_read_engine()) as session:
        node_id = authenticate_node_token(session, credential)
    if node_id is None:
        raise AuthenticationRequired("unknown or revoked node token")
    return Principal(kind="node", node_id=node_id, via="node-token")


def principal_from_authorization(authorization: str) -> Principal:
    """The caller named by an Authorization header; AuthenticationRequired (401) for anything not valid."""
    scheme, _, credential = authorization.strip().partition(" ")
    credential = credential.strip()
    if scheme.lower() == "bearer" and credential.startswith(TOKEN_PREFIX):
        return _principal_from_token(credential)
    if scheme.lower() == "bearer" and credential.startswith(NODE_TOKEN_PREFIX):
        return _principal_from_node_token(credential)
    raise AuthenticationRequired(f"expected 'Authorization: Bearer {TOKEN_PREFIX}…'")


def _principal_from_cookie(request: Request, settings: Settings) -> Principal | None:
    data = sessions.read_session(request, settings.secret_key)
    if data is None:
        return None
    with Session(get_read_engine()) as session:
        user = session.get(UserAccount, data.user_id)
        if user is None or not user.is_active or user.session_version != data.version:
            return None
        return Principal(
            kind="user",
            user_id=user.id,
            email=user.email,
            scopes=user_scopes(user),
            via="cookie",
            csrf_token=data.csrf_token,
        )


def resolve_principal(request: Request) -> Principal:
    """Work out (once per request) who is calling; see the module docstring for the rules."""
    cached = getattr(request.state, "principal", None)
    if isinstance(cached, Principal):
        return cached
    principal = _principal_of(request)
    request.state.principal = principal
    return principal


def _principal_of(request: Request) -> Principal:
    """The caller named by the request's credential, read now: a bad Authorization header raises
    AuthenticationRequired (401); no credential, or a cookie that no longer holds, is ANONYMOUS."""
    authorization = request.headers.get("authorization")
    if authorization is not None:
        return principal_from_authorization(authorization)
    return _principal_from_cookie(request, _settings(request)) or ANONYMOUS


def fresh_principal(request: Request) -> Principal:
    """The caller worked out again from the request's credential, past the once-per-request cache: for a response
    that outlives the moment it was authorised (an event stream), so that a token revoked or expired since, a
    cookie signed out since, or an account deactivated or demoted since, no longer counts (sync: it reads the
    database). ANONYMOUS when the credential no longer holds."""
    try:
        return _principal_of(request)
    except AuthenticationRequired:
        return ANONYMOUS


def current_principal(request: Request) -> Principal:
    """Dependency: the caller, authenticated or not (never raises for a missing credential)."""
    return resolve_principal(request)


async def presented_csrf_token(request: Request) -> str | None:
    """The token from the X-CSRF-Token header, or from the `csrf_token` field of an HTML form post."""
    header = request.headers.get(sessions.CSRF_HEADER)
    if header:
        return header
    content_type = request.headers.get("content-type", "")
    if content_type.startswith(("application/x-www-form-urlencoded", "multipart/form-data")):
        form = await request.form()  # Starlette caches it; the route reads the same parsed form
        value = form.get(sessions.CSRF_FORM_FIELD)
        return value if isinstance(value, str) else None
    return None


async def check_csrf(request: Request, principal: Principal) -> None:
    """Refuse cross-site unsafe requests that ride on a cookie (403)."""
    if request.method in SAFE_METHODS or principal.via != "cookie":
        return
    if sessions.tokens_match(principal.csrf_token, await presented_csrf_token(request)):
        return
    if sessions.browser_origin_verdict(request, _settings(request)) is True:
        return
    raise HTTPException(
        status_code=403,
        detail="cross-site request refused: send the X-CSRF-Token header (see static/js/csrf.js)",
    )


def require_scope(scope: str) -> Callable[..., Principal]:
    """Dependency factory: the caller must hold `scope` (401 when not signed in, 403 when not allowed)."""
    if scope not in SCOPES:
        raise ValueError(f"unknown scope {scope}")

    async def dependency(request: Request, principal: Principal = Depends(current_principal)) -> Principal:
        if not principal.has(scope):
            if not principal.is_authenticated:
                raise AuthenticationRequired(f"sign in or send an API token with scope {scope}")
            raise HTTPException(status_code=403, detail=f"this credential lacks the {scope} scope")
        await check_csrf(request, principal)
        return principal

    dependency.__name__ = f"require_{scope.replace(':', '_')}"
    dependency.required_scope = scope  # type: ignore[attr-defined]  # read by the route-walking test
    # FastAPI awaits it; to the route it is "something that yields a Principal".
    return cast(Callable[..., Principal], dependency)


async def require_user(request: Request, principal: Principal = Depends(current_principal)) -> Principal:
    """Dependency: a signed-in user (cookie or personal token), for things that belong to an account."""
    if principal.user_id is None:
        if not principal.is_authenticated:
            raise AuthenticationRequired("sign in or send a personal API token")
        raise HTTPException(status_code=403, detail="this credential does not belong to a user account")
    await check_csrf(request, principal)
    return principal


require_user.requires_user = True  # type: ignore[attr-defined]  # read by the route-walking test

BROWSER_SESSION_ONLY = "change the password from a signed-in browser session"


async def require_browser_session(
    request: Request, principal: Principal = Depends(current_principal)
) -> Principal:
    """Dependency: a user signed in through a browser session (the `cp_session` cookie), for changing the password.
    An API token, whatever its scopes, is refused (403): a token that leaks must not be able to lock its owner
    out and take the account over."""
    if principal.via != "cookie":
        if not principal.is_authenticated:
            raise AuthenticationRequired(f"sign in first: {BROWSER_SESSION_ONLY}")
        raise HTTPException(status_code=403, detail=BROWSER_SESSION_ONLY)
    await check_csrf(request, principal)
    return principal


require_browser_session.requires_user = True  # type: ignore[attr-defined]
require_browser_session.requires_session = True  # type: ignore[attr-defined]  # tokens refused (route walk, OpenAPI)


def principal_user_id(principal: Principal) -> uuid.UUID | None:
    return principal.user_id if isinstance(principal.user_id, uuid.UUID) else None


# Calibration profiles are users' measurements: listing them, or naming one in a calculation (estimate,
# network model, builder), needs the scope of GET /api/v1/calibration/profiles.
PROFILE_SCOPE = "plans:read"


def may_use_profiles(principal: Principal) -> bool:
    """Whether the caller may list calibration profiles and name one in a calculation."""
    return principal.has(PROFILE_SCOPE)


def check_profile_use(request: Request) -> Principal:
    """The caller of a public calculation that names a calibration profile, if they may use one: 401 when
    not signed in, 403 for a credential without plans:read (sync: it may look a cookie session up)."""
    principal = resolve_principal(request)
    if may_use_profiles(principal):
        return principal
    if not principal.is_authenticated:
        raise AuthenticationRequired(
            f"calibration profiles are for signed-in users: sign in or send an API token with scope "
            f"{PROFILE_SCOPE} to use one (profile), or leave profile out for the published defaults"
        )
    raise HTTPException(
        status_code=403,
        detail=f"this credential lacks the {PROFILE_SCOPE} scope needed to use a calibration profile",
    )


def profile_named(*refs: object) -> bool:
    """Whether a request names a calibration profile: a top-level `profile` field, or one inside an embedded
    estimator scenario (a Scenario model or its JSON object), wherever a route takes either."""
    for ref in refs:
        nested = ref.get("profile") if isinstance(ref, dict) else getattr(ref, "profile", ref)
        if nested:
            return True
    return False


def check_profiles_in(request: Request, *refs: object) -> None:
    """check_profile_use when any of `refs` names a profile (profile_named), before anything is resolved, so
    that an unknown name's suggestions reach only those who may use profiles."""
    if profile_named(*refs):
        check_profile_use(request)


@dataclass(frozen=True)
class RouteRequirement:
    """What a route's dependency tree asks of its caller (read from the dependencies, not from docs)."""

    scopes: frozenset[str]
    user: bool
    node: bool
    session: bool = False  # a browser session only: API tokens refused (require_browser_session)

    @property
    def anything(self) -> bool:
        return bool(self.scopes) or self.user or self.node


def route_requirement(dependant: Any) -> RouteRequirement:
    """Scopes (`require_scope`), user account (`require_user`), browser session (`require_browser_session`) and
    node token (app.auth.nodes) needed."""
    scopes: set[str] = set()
    user = node = session = False
    stack = list(getattr(dependant, "dependencies", []))
    while stack:
        sub = stack.pop()
        call = sub.call
        scope = getattr(call, "required_scope", None)
        if scope:
            scopes.add(scope)
        user = user or bool(getattr(call, "requires_user", False))
        session = session or bool(getattr(call, "requires_session", False))
        node = node or getattr(call, "__module__", "") == "app.auth.nodes"
        stack.extend(sub.dependencies)
    return RouteRequirement(frozenset(scopes), user, node, session)


# The principal dependencies of the routes and pages, each defined once (the scopes are app.auth.tokens.SCOPES).
PrincipalDep = Annotated[Principal, Depends(current_principal)]
ReadDep = Annotated[Principal, Depends(require_scope("plans:read"))]
WriteDep = Annotated[Principal, Depends(require_scope("plans:write"))]
RunDep = Annotated[Principal, Depends(require_scope("benchmarks:run"))]
AdminDep = Annotated[Principal, Depends(require_scope("admin"))]
