"""User accounts (administrators only)."""

from __future__ import annotations

import uuid

from fastapi import APIRouter, Depends, HTTPException, status

from app.api.routes.auth import bounded_paging
from app.auth.deps import Principal, require_scope
from app.auth.users import UserExistsError, change_email, create_user, list_users, set_active, set_password
from app.deps import SessionDep
from app.models.auth import UserAccount
from app.schemas.envelope import ListEnvelope, Paging
from app.schemas.users import UserCreate, UserPublic, UserUpdate

router = APIRouter(prefix="/users", tags=["users"])


@router.post(
    "",
    operation_id="users_create",
    response_model=UserPublic,
    status_code=status.HTTP_201_CREATED,
    responses={409: {"description": "e-mail already taken"}},
)
def create_user_account(
    body: UserCreate, session: SessionDep, _admin: Principal = Depends(require_scope("admin"))
) -> UserPublic:
    """Create a user account (argon2id-hashed password)."""
    try:
        user = create_user(session, body.email, body.password, is_admin=body.is_admin)
    except UserExistsError as exc:
        raise HTTPException(status_code=409, detail=str(exc)) from exc
    except ValueError as exc:
        field = "password" if "password" in str(exc) else "email"
        raise HTTPException(
            status_code=422, detail=[{"loc": ["body", field], "msg": str(exc), "type": "value_error"}]
        ) from exc
    return UserPublic.of(user)


@router.get("", operation_id="users_list", response_model=ListEnvelope[UserPublic])
def list_user_accounts(
    session: SessionDep,
    page: Paging = Depends(bounded_paging),
    _admin: Principal = Depends(require_scope("admin")),
) -> ListEnvelope[UserPublic]:
    rows, total = list_users(session, page.offset, page.limit)
    return ListEnvelope[UserPublic](data=[UserPublic.of(u) for u in rows], count=total)


@router.patch(
    "/{user_id}",
    operation_id="users_update",
    response_model=UserPublic,
    responses={
        404: {"description": "no such user"},
        409: {"description": "would leave no active administrator, or the new e-mail is taken"},
    },
)
def update_user_account(
    user_id: uuid.UUID,
    body: UserUpdate,
    session: SessionDep,
    _admin: Principal = Depends(require_scope("admin")),
) -> UserPublic:
    """Deactivate or reactivate a user, grant or withdraw admin, set a new password, or move the account to
    another e-mail (administrators only: no mail proves an address, and plans shared by address reach its holder).

    Takes effect on the next request: deactivation ends the user's sessions and stops their API tokens; a new
    password ends their sessions (every browser signs in again).
    """
    user = session.get(UserAccount, user_id)
    if user is None:
        raise HTTPException(status_code=404, detail=f"no user {user_id}")
    demoting = (body.is_active is False or body.is_admin is False) and user.is_admin and user.is_active
    if demoting:
        admins = [u for u in list_users(session, 0, 100_000)[0] if u.is_admin and u.is_active]
        if len(admins) <= 1:
            raise HTTPException(status_code=409, detail="this is the last active administrator")
    if body.email is not None:  # a refused address is a SpecError on `email`: 422 through the app's handler
        try:
            user = change_email(session, user, body.email, by_admin=True)
        except UserExistsError as exc:
            raise HTTPException(status_code=409, detail=str(exc)) from exc
    if body.is_admin is not None:
        user.is_admin = body.is_admin
    if body.is_active is not None:
        user = set_active(session, user, body.is_active)
    if body.password is not None:
        try:
            user = set_password(session, user, body.password)
        except ValueError as exc:
            raise HTTPException(
                status_code=422,
                detail=[{"loc": ["body", "password"], "msg": str(exc), "type": "value_error"}],
            ) from exc
    session.add(user)
    session.commit()
    session.refresh(user)
    return UserPublic.of(user)
