"""Sign-in for the API and the browser, who-am-I, and personal API tokens."""

from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import APIRouter, Depends, HTTPException, Query, Request, Response, status

from app.auth import sessions
from app.auth.clientaddr import settings_of
from app.auth.deps import Principal, current_principal, require_browser_session, require_user
from app.auth.passwords import verify_password
from app.auth.signin import attempt_sign_in, end_session, start_session
from app.auth.tokens import (
    SCOPES,
    create_token,
    expiry_limit,
    list_tokens,
    may_revoke,
    revoke_refusal,
    revoke_token,
)
from app.auth.users import has_usable_password, set_password
from app.deps import SessionDep
from app.models.auth import ApiToken, UserAccount
from app.schemas.envelope import ListEnvelope, Paging
from app.schemas.users import (
    LoginRequest,
    LoginResponse,
    PasswordChange,
    TokenCreate,
    TokenCreated,
    TokenPublic,
    UserPublic,
    WhoAmI,
)

# each operation names its own tag: the token routes are "tokens" only (under "auth" too, the API docs listed them twice)
router = APIRouter()

MAX_OFFSET = 2**31 - 1  # beyond a 64-bit SQL integer the database driver overflows (a 500)


def bounded_paging(
    offset: Annotated[int, Query(ge=0, le=MAX_OFFSET, description="rows to skip")] = 0,
    limit: Annotated[int, Query(ge=1, le=1000, description="rows to return")] = 100,
) -> Paging:
    return Paging(offset=offset, limit=limit)


def check_login_origin(request: Request) -> None:
    """Login CSRF: a browser posting from another site must not sign the victim into our app."""
    if sessions.browser_origin_verdict(request) is False:
        raise HTTPException(status_code=403, detail="cross-site sign-in refused")


@router.post(
    "/auth/login",
    tags=["auth"],
    operation_id="auth_login",
    response_model=LoginResponse,
    responses={
        400: {"description": "plain HTTP from another machine: the Secure cookie would be dropped"},
        401: {"description": "wrong e-mail or password"},
        429: {"description": "too many failures for this account from this address; see Retry-After"},
    },
)
def login(body: LoginRequest, request: Request, response: Response, session: SessionDep) -> LoginResponse:
    """Check e-mail and password and start a cookie session (for browsers; scripts should use API tokens)."""
    check_login_origin(request)
    settings = settings_of(request)
    outcome = attempt_sign_in(session, request, settings, body.email, body.password)
    if outcome.needs_tls:
        raise HTTPException(status_code=400, detail=sessions.COOKIE_NEEDS_TLS)
    if outcome.throttled:
        raise HTTPException(
            status_code=429,
            detail=f"too many failed sign-ins for this account; retry in {outcome.retry_after_s} s",
            headers={"Retry-After": str(outcome.retry_after_s)},
        )
    if outcome.user is None:
        raise HTTPException(status_code=401, detail="wrong e-mail or password")
    csrf = start_session(response, request, settings, outcome.user)
    return LoginResponse(user=UserPublic.of(outcome.user), csrf_token=csrf)


@router.post(
    "/auth/logout", tags=["auth"], operation_id="auth_logout", status_code=status.HTTP_204_NO_CONTENT
)
def logout(request: Request, session: SessionDep) -> Response:
    """End the user's cookie sessions in every browser (API tokens are unaffected; revoke them separately)."""
    check_login_origin(request)
    response = Response(status_code=status.HTTP_204_NO_CONTENT)
    end_session(session, response, request, settings_of(request))
    return response


@router.post(
    "/auth/password",
    tags=["auth"],
    operation_id="auth_change_password",
    response_model=LoginResponse,
    responses={403: {"description": "the current password is wrong, or the caller sent an API token"}},
)
def change_password(
    body: PasswordChange,
    request: Request,
    response: Response,
    session: SessionDep,
    principal: Principal = Depends(require_browser_session),
) -> LoginResponse:
    """Set a new password from a signed-in browser session (an API token of any scope is a 403): every session of
    the account ends, and this browser gets a fresh one."""
    user = session.get(UserAccount, principal.user_id)
    if user is None or not user.is_active:
        raise HTTPException(status_code=401, detail="account no longer active")
    if has_usable_password(user) and not verify_password(user.password_hash, body.current_password or ""):
        raise HTTPException(status_code=403, detail="the current password is wrong")
    try:
        user = set_password(session, user, body.new_password)
    except ValueError as exc:
        raise HTTPException(
            status_code=422,
            detail=[{"loc": ["body", "new_password"], "msg": str(exc), "type": "value_error"}],
        ) from exc
    csrf = start_session(response, request, settings_of(request), user)
    return LoginResponse(user=UserPublic.of(user), csrf_token=csrf)


@router.get("/auth/me", tags=["auth"], operation_id="auth_me", response_model=WhoAmI)
def me(principal: Principal = Depends(current_principal)) -> WhoAmI:
    """Who the server takes the caller to be, and what they may do."""
    return WhoAmI(
        authenticated=principal.is_authenticated,
        kind=principal.kind,
        via=principal.via,
        email=principal.email,
        user_id=principal.user_id if isinstance(principal.user_id, uuid.UUID) else None,
        scopes=[s for s in SCOPES if s in principal.scopes],
    )


def _owned_token(session: SessionDep, token_id: uuid.UUID, principal: Principal) -> ApiToken:
    token = session.get(ApiToken, token_id)
    if token is None or (token.user_id != principal.user_id and not principal.has("admin")):
        raise HTTPException(status_code=404, detail=f"no token {token_id}")
    return token


@router.post(
    "/tokens",
    tags=["tokens"],
    operation_id="tokens_create",
    response_model=TokenCreated,
    status_code=status.HTTP_201_CREATED,
    responses={403: {"description": "a scope beyond what the caller holds"}},
)
def create_api_token(
    body: TokenCreate, session: SessionDep, principal: Principal = Depends(require_user)
) -> TokenCreated:
    """Issue a personal API token. The secret is in this response only; the server keeps just its hash.

    Asked for with an API token, the new token gets at most the scopes and the lifetime of that token: a
    later expiry, or none, is shortened to the presenting token's (`expires_at` in the response says when)."""
    user = session.get(UserAccount, principal.user_id)
    if user is None or not user.is_active:
        raise HTTPException(status_code=401, detail="account no longer active")
    try:
        issued = create_token(
            session,
            user,
            body.name,
            list(body.scopes),
            body.expires_in_days,
            allowed=principal.scopes,
            not_after=expiry_limit(session, principal.token_id),
        )
    except PermissionError as exc:
        raise HTTPException(status_code=403, detail=str(exc)) from exc
    except ValueError as exc:
        raise HTTPException(
            status_code=422, detail=[{"loc": ["body"], "msg": str(exc), "type": "value_error"}]
        ) from exc
    return TokenCreated(**TokenPublic.of(issued.token).model_dump(), token=issued.plaintext)


@router.get("/tokens", tags=["tokens"], operation_id="tokens_list", response_model=ListEnvelope[TokenPublic])
def list_api_tokens(
    session: SessionDep,
    page: Paging = Depends(bounded_paging),
    principal: Principal = Depends(require_user),
) -> ListEnvelope[TokenPublic]:
    """The caller's tokens, newest first (prefixes only; secrets are never shown again)."""
    rows, total = list_tokens(session, principal.user_id, page.offset, page.limit)
    return ListEnvelope[TokenPublic](data=[TokenPublic.of(t) for t in rows], count=total)


@router.get("/tokens/{token_id}", tags=["tokens"], operation_id="tokens_get", response_model=TokenPublic)
def get_api_token(
    token_id: uuid.UUID, session: SessionDep, principal: Principal = Depends(require_user)
) -> TokenPublic:
    return TokenPublic.of(_owned_token(session, token_id, principal))


@router.delete(
    "/tokens/{token_id}",
    tags=["tokens"],
    operation_id="tokens_revoke",
    response_model=TokenPublic,
    responses={403: {"description": "the presenting API token lacks a scope of the token to revoke"}},
)
def revoke_api_token(
    token_id: uuid.UUID, session: SessionDep, principal: Principal = Depends(require_user)
) -> TokenPublic:
    """Revoke a token at once; it stays listed with its revocation time. Through an API token, only that token
    itself and tokens whose every scope it holds (a cookie session may revoke any of its user's tokens)."""
    token = _owned_token(session, token_id, principal)
    if not may_revoke(token, principal.token_id, principal.scopes):
        raise HTTPException(status_code=403, detail=revoke_refusal(token, principal.scopes))
    return TokenPublic.of(revoke_token(session, token))
