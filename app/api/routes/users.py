"""User accounts (administrators only)."""

from __future__ import annotations

from fastapi import APIRouter, Depends, HTTPException, status
from pydantic import BaseModel, Field

from app.api.deps import SessionDep
from app.api.envelope import ListEnvelope, Paging
from app.api.routes.auth import UserPublic, bounded_paging
from app.auth.deps import Principal, require_scope
from app.auth.passwords import MAX_PASSWORD_LENGTH, MIN_PASSWORD_LENGTH
from app.auth.users import UserExistsError, create_user, list_users

router = APIRouter(prefix="/users", tags=["users"])


class UserCreate(BaseModel):
    email: str = Field(min_length=3, max_length=320, examples=["ada@example.com"])
    password: str = Field(min_length=MIN_PASSWORD_LENGTH, max_length=MAX_PASSWORD_LENGTH)
    is_admin: bool = False


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
