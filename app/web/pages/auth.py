"""Sign-in, sign-out and personal API token pages (plain HTML forms; no script needed)."""

from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import APIRouter, Depends, Form, HTTPException, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from sqlmodel import Session

from app.auth import sessions
from app.auth.deps import (
    AuthenticationRequired,
    Principal,
    anonymous_may_act_locally,
    current_principal,
    require_user,
)
from app.auth.tokens import SCOPES, create_token, list_tokens, revoke_token, user_scopes
from app.auth.users import authenticate
from app.db import get_engine
from app.models.auth import ApiToken, UserAccount
from app.settings import get_settings
from app.web.templating import render, templates

router = APIRouter()

TOKEN_LIFETIMES_DAYS = (7, 30, 90, 365)


def csrf_token_for(request: Request) -> str:
    """The CSRF token of the browser's session ('' when signed out): for <meta name="csrf-token">."""
    data = sessions.read_session(request, get_settings().secret_key)
    return data.csrf_token if data else ""


templates.env.globals["csrf_token"] = csrf_token_for


def safe_next(target: str | None) -> str:
    """Only same-site paths: never `//evil.example` or `https://…` (open redirect)."""
    if not target or not target.startswith("/") or target.startswith("//") or "\\" in target:
        return "/"
    return target


@router.get("/login", response_class=HTMLResponse)
def login_page(request: Request, next: str = "/") -> HTMLResponse:
    principal = current_principal(request)
    return render(
        request,
        "login.html",
        {"title": "Sign in", "next": safe_next(next), "principal": principal, "error": None, "email": ""},
        block="content",
    )


@router.post("/login", response_class=HTMLResponse)
def login_submit(
    request: Request,
    email: Annotated[str, Form(max_length=320)],
    password: Annotated[str, Form(max_length=1024)],
    next: Annotated[str, Form(max_length=2000)] = "/",
) -> Response:
    if sessions.browser_origin_verdict(request) is False:
        raise HTTPException(status_code=403, detail="cross-site sign-in refused")
    limiter = getattr(request.app.state, "login_limiter", None)
    wait = limiter.acquire("email:" + email.strip().lower()) if limiter is not None else 0.0
    user = None
    if wait == 0:
        with Session(get_engine()) as session:
            user = authenticate(session, email, password)
    if user is None:
        error = "Too many attempts; wait a minute." if wait else "Wrong e-mail or password."
        return render(
            request,
            "login.html",
            {"title": "Sign in", "next": safe_next(next), "principal": None, "error": error, "email": email},
            status_code=429 if wait else 401,
        )
    response = RedirectResponse(safe_next(next), status_code=303)
    sessions.set_session_cookies(response, request, get_settings().secret_key, user.id)
    return response


@router.post("/logout")
def logout_submit(request: Request) -> Response:
    if sessions.browser_origin_verdict(request) is False:
        raise HTTPException(status_code=403, detail="cross-site request refused")
    response = RedirectResponse("/login", status_code=303)
    sessions.clear_session_cookies(response, request)
    return response


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
        if not anonymous_may_act_locally(request):
            raise AuthenticationRequired("sign in to manage API tokens")
        # The local first-run user has no account: explain how to make one.
        return render(
            request,
            "tokens.html",
            {"title": "API tokens", "principal": principal, "tokens": []},
            block="content",
        )
    return render(request, "tokens.html", _tokens_context(request, principal), block="content")


@router.post("/tokens", response_class=HTMLResponse)
def tokens_create(
    request: Request,
    name: Annotated[str, Form(min_length=1, max_length=200)],
    scopes: Annotated[list[str], Form()],
    expires_in_days: Annotated[int, Form(ge=0, le=3650)] = 90,
    principal: Principal = Depends(require_user),
) -> HTMLResponse:
    with Session(get_engine()) as session:
        user = session.get(UserAccount, principal.user_id)
        if user is None:
            raise AuthenticationRequired("account no longer exists")
        try:
            issued = create_token(
                session, user, name, scopes, expires_in_days or None, allowed=principal.scopes
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
    with Session(get_engine()) as session:
        token = session.get(ApiToken, token_id)
        if token is None or token.user_id != principal.user_id:
            raise HTTPException(status_code=404, detail=f"no token {token_id}")
        revoke_token(session, token)
    return RedirectResponse("/tokens", status_code=303)
