"""Sign-in (password or one-time link), sign-out, password and personal API token pages (plain HTML forms)."""

from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import APIRouter, Depends, Form, HTTPException, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from pydantic import Field
from sqlmodel import Session

from app.auth import sessions
from app.auth.bootstrap import consume_link_token
from app.auth.clientaddr import settings_of
from app.auth.deps import (
    AuthenticationRequired,
    Principal,
    current_principal,
    require_browser_session,
    require_user,
)
from app.auth.passwords import MAX_PASSWORD_LENGTH, verify_password
from app.auth.signin import attempt_sign_in, end_session, start_session
from app.auth.tokens import (
    SCOPES,
    create_token,
    expiry_limit,
    list_tokens,
    may_revoke,
    revoke_refusal,
    revoke_token,
    user_scopes,
)
from app.auth.users import UserExistsError, change_email, has_usable_password, set_password
from app.db import get_engine
from app.models.auth import ApiToken, UserAccount
from app.web.templating import render, templates

router = APIRouter()

TOKEN_LIFETIMES_DAYS = (7, 30, 90, 365)


def csrf_token_for(request: Request) -> str:
    """The CSRF token of the browser's session ('' when signed out): for <meta name="csrf-token">."""
    data = sessions.read_session(request, settings_of(request).secret_key)
    return data.csrf_token if data else ""


def signed_in_as(request: Request) -> str:
    """The e-mail of the user this browser session signed in ('' when signed out, or for an API-token caller): for
    the top bar's "Sign out"."""
    try:
        principal = current_principal(request)
    except AuthenticationRequired:  # a malformed Authorization header: the page says so, not the top bar
        return ""
    return (principal.email or "") if principal.via == "cookie" else ""


templates.env.globals["csrf_token"] = csrf_token_for
templates.env.globals["signed_in_as"] = signed_in_as
# the same, under a name no page's context shadows (some pages pass their own `csrf_token` string)
templates.env.globals["session_csrf_token"] = csrf_token_for


def safe_next(target: str | None) -> str:
    """Only same-site paths: never `//evil.example` or `https://…` (open redirect)."""
    if not target or not target.startswith("/") or target.startswith("//") or "\\" in target:
        return "/"
    return target


LINK_REFUSED = "This sign-in link is not valid (already used, expired or replaced by a newer one). Restart \
`clusterplan serve` for a new link, or sign in with a password."
NO_STORE = {"Cache-Control": "no-store"}


def _login_page(
    request: Request, next: str, error: str | None = None, email: str = "", status_code: int = 200
) -> HTMLResponse:
    settings = settings_of(request)
    if error is None and sessions.cookie_needs_tls(request, settings):
        error = sessions.COOKIE_NEEDS_TLS  # say so before anyone types a password
    context = {"title": "Sign in", "next": safe_next(next), "error": error, "email": email}
    return render(request, "login.html", context, block="content", status_code=status_code)


@router.get("/login", response_class=HTMLResponse)
def login_page(
    request: Request,
    next: Annotated[str, Query(max_length=2000)] = "/",  # as the sign-in form's `next`
) -> HTMLResponse:
    return _login_page(request, next)


@router.post("/login", response_class=HTMLResponse)
def login_submit(
    request: Request,
    email: Annotated[str, Form(max_length=320)],
    password: Annotated[str, Form(max_length=MAX_PASSWORD_LENGTH)],
    next: Annotated[str, Form(max_length=2000)] = "/",
) -> Response:
    if sessions.browser_origin_verdict(request) is False:
        raise HTTPException(status_code=403, detail="cross-site sign-in refused")
    settings = settings_of(request)
    with Session(get_engine()) as session:
        outcome = attempt_sign_in(session, request, settings, email, password)
    if outcome.needs_tls:
        return _login_page(request, next, sessions.COOKIE_NEEDS_TLS, email, status_code=400)
    if outcome.throttled:
        error = f"Too many failed attempts; try again in {outcome.retry_after_s} s."
        throttled = _login_page(request, next, error, email, status_code=429)
        throttled.headers["Retry-After"] = str(outcome.retry_after_s)
        return throttled
    if outcome.user is None:
        return _login_page(request, next, "Wrong e-mail or password.", email, status_code=401)
    response = RedirectResponse(safe_next(next), status_code=303)
    start_session(response, request, settings, outcome.user)
    return response


@router.get("/login/link", response_class=HTMLResponse)
def login_link(request: Request, token: Annotated[str, Query(max_length=200)] = "") -> Response:
    """The one-time link `clusterplan serve` prints on a first run: sign in, then choose a password."""
    settings = settings_of(request)
    if sessions.cookie_needs_tls(request, settings):
        return _login_page(request, "/", sessions.COOKIE_NEEDS_TLS, status_code=400)
    with Session(get_engine()) as session:
        user = consume_link_token(session, token)
    if user is None:
        return _login_page(request, "/", LINK_REFUSED, status_code=400)
    response = RedirectResponse("/account/password", status_code=303, headers=NO_STORE)
    start_session(response, request, settings, user)
    return response


@router.post("/logout")
def logout_submit(request: Request) -> Response:
    if sessions.browser_origin_verdict(request) is False:
        raise HTTPException(status_code=403, detail="cross-site request refused")
    response = RedirectResponse("/login", status_code=303)
    with Session(get_engine()) as session:
        end_session(session, response, request, settings_of(request))
    return response


def _account_context(
    user: UserAccount, principal: Principal, error: str | None = None, done: bool = False
) -> dict[str, object]:
    return {
        "title": "Your password",
        "email": user.email,
        "has_password": has_usable_password(user),
        # app.auth.users.change_email: only an administrator may move an account to another address
        "may_change_email": principal.has("admin"),
        "error": error,
        "done": done,
    }


@router.get("/account/password", response_class=HTMLResponse)
def password_page(
    request: Request, done: bool = False, principal: Principal = Depends(require_browser_session)
) -> HTMLResponse:
    """The password form, for a signed-in browser session only, as its POST: an API token gets the same 403."""
    with Session(get_engine()) as session:
        user = session.get(UserAccount, principal.user_id)
        if user is None:
            raise AuthenticationRequired("account no longer exists")
        context = _account_context(user, principal, done=done)
        return render(request, "account_password.html", context, block="content")


@router.post("/account/password", response_class=HTMLResponse)
def password_submit(
    request: Request,
    email: Annotated[str, Form(min_length=1, max_length=320)],
    new_password: Annotated[str, Form(max_length=MAX_PASSWORD_LENGTH)],
    confirm_password: Annotated[str, Form(max_length=MAX_PASSWORD_LENGTH)],
    current_password: Annotated[str, Form(max_length=MAX_PASSWORD_LENGTH)] = "",
    principal: Principal = Depends(require_browser_session),
) -> Response:
    """Change the password (and optionally the e-mail); every other session of the account ends."""
    with Session(get_engine()) as session:
        user = session.get(UserAccount, principal.user_id)
        if user is None:
            raise AuthenticationRequired("account no longer exists")
        error = _password_change_error(user, current_password, new_password, confirm_password)
        if error is None:
            try:
                user = change_email(session, user, email, by_admin=principal.has("admin"))
                user = set_password(session, user, new_password)
            except (ValueError, UserExistsError) as exc:
                error = str(exc)
        if error is not None:
            context = _account_context(user, principal, error)
            return render(request, "account_password.html", context, status_code=422)
        # A redirect, so the next page carries the new session's CSRF token.
        response = RedirectResponse("/account/password?done=1", status_code=303)
        start_session(response, request, settings_of(request), user)
        return response


def _password_change_error(user: UserAccount, current: str, new: str, confirm: str) -> str | None:
    if has_usable_password(user) and not verify_password(user.password_hash, current):
        return "current_password: the current password is wrong"
    if new != confirm:
        return "confirm_password: the two new passwords differ"
    return None


def _tokens_context(request: Request, principal: Principal, created: str | None = None) -> dict[str, object]:
    with Session(get_engine()) as session:
        user = session.get(UserAccount, principal.user_id)
        rows, _ = list_tokens(session, principal.user_id, 0, 1000)
        grantable = [s for s in SCOPES if user is not None and s in user_scopes(user) & principal.scopes]
    return {
        "title": "API tokens",
        "principal": principal,
        "tokens": rows,
        "grantable": grantable,
        "lifetimes": TOKEN_LIFETIMES_DAYS,
        "created": created,
        "error": None,
    }


@router.get("/tokens", response_class=HTMLResponse)
def tokens_page(request: Request, principal: Principal = Depends(current_principal)) -> HTMLResponse:
    if principal.user_id is None:
        raise AuthenticationRequired("sign in to manage API tokens")
    return render(request, "tokens.html", _tokens_context(request, principal), block="content")


@router.post("/tokens", response_class=HTMLResponse)
def tokens_create(
    request: Request,
    name: Annotated[str, Form(min_length=1, max_length=200)],
    # a scope name each (the longest, 'benchmarks:run', has 14 characters), at most every scope once
    scopes: Annotated[list[Annotated[str, Field(max_length=100)]], Form(max_length=len(SCOPES))],
    expires_in_days: Annotated[int, Form(ge=0, le=3650)] = 90,
    principal: Principal = Depends(require_user),
) -> HTMLResponse:
    with Session(get_engine()) as session:
        user = session.get(UserAccount, principal.user_id)
        if user is None:
            raise AuthenticationRequired("account no longer exists")
        try:
            issued = create_token(
                session,
                user,
                name,
                scopes,
                expires_in_days or None,
                allowed=principal.scopes,
                not_after=expiry_limit(session, principal.token_id),  # an API token caller: its own expiry
            )
        except (ValueError, PermissionError) as exc:
            context = _tokens_context(request, principal)
            context["error"] = str(exc)
            return render(request, "tokens.html", context, status_code=422)
    # Shown once, in this response only; no-store keeps it out of caches and the back button.
    return render(
        request,
        "tokens.html",
        _tokens_context(request, principal, created=issued.plaintext),
        headers={"Cache-Control": "no-store"},
    )


@router.post("/tokens/{token_id}/revoke")
def tokens_revoke(token_id: uuid.UUID, principal: Principal = Depends(require_user)) -> Response:
    """Revoke one of the caller's tokens (as DELETE /api/v1/tokens/{id}: through an API token, only itself and
    tokens whose every scope it holds)."""
    with Session(get_engine()) as session:
        token = session.get(ApiToken, token_id)
        if token is None or token.user_id != principal.user_id:
            raise HTTPException(status_code=404, detail=f"no token {token_id}")
        if not may_revoke(token, principal.token_id, principal.scopes):
            raise HTTPException(status_code=403, detail=revoke_refusal(token, principal.scopes))
        revoke_token(session, token)
    return RedirectResponse("/tokens", status_code=303)
