"""Request and response bodies of users, sign-in and personal API tokens."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from app.auth.passwords import MAX_PASSWORD_LENGTH, MIN_PASSWORD_LENGTH
from app.auth.tokens import MAX_TOKEN_DAYS, SCOPES
from app.models.auth import ApiToken, UserAccount
from app.models.base import as_utc
from app.schemas.fields import SafeStr

ScopeName = Annotated[str, Field(pattern="^(plans:read|plans:write|benchmarks:run|admin)$")]


class UserKey(BaseModel):
    """The id of a user account (the first field of every view of one)."""

    id: uuid.UUID


class UserBase(BaseModel):
    """A user account as an administrator creates it (UserCreate) and as it is read back (UserPublic)."""

    email: SafeStr = Field(min_length=3, max_length=320, examples=["ada@example.com"])
    is_admin: bool = False


# UserKey comes last among the bases so that `id` leads the serialised user (pydantic orders fields from the last
# base to the first)
class UserPublic(UserBase, UserKey):
    model_config = ConfigDict(from_attributes=True)
    is_active: bool
    created_at: datetime

    @classmethod
    def of(cls, user: UserAccount) -> UserPublic:
        public = cls.model_validate(user)
        public.created_at = as_utc(public.created_at) or public.created_at
        return public


class LoginRequest(BaseModel):
    email: SafeStr = Field(min_length=3, max_length=320, examples=["ada@example.com"])
    password: str = Field(min_length=1, max_length=1024)


class LoginResponse(BaseModel):
    user: UserPublic
    csrf_token: str = Field(
        description="send as the X-CSRF-Token header on unsafe requests made with the cookie"
    )


class WhoAmI(BaseModel):
    authenticated: bool
    kind: str = Field(description="user (cookie), token, node, or anonymous")
    via: str = Field(description="cookie, token, node-token or none")
    email: str | None
    user_id: uuid.UUID | None
    scopes: list[str]


class PasswordChange(BaseModel):
    current_password: str | None = Field(
        default=None, max_length=MAX_PASSWORD_LENGTH, description="required unless the account has none yet"
    )
    new_password: str = Field(min_length=MIN_PASSWORD_LENGTH, max_length=MAX_PASSWORD_LENGTH)


class TokenKey(BaseModel):
    """The id of a personal API token (the first field of every view of one)."""

    id: uuid.UUID


class TokenBase(BaseModel):
    """A token's name, as given (TokenCreate) and as listed (TokenPublic)."""

    name: SafeStr = Field(min_length=1, max_length=200, examples=["procurement script"])


class TokenScopes(BaseModel):
    """What a token may do, as given (TokenCreate) and as listed (TokenPublic)."""

    scopes: list[ScopeName] = Field(min_length=1, max_length=len(SCOPES), examples=[["plans:read"]])


class TokenLabel(TokenBase, TokenKey):
    """How a token is recognised in a list: its id, name and first characters."""

    prefix: str = Field(description="the first characters of the token, to recognise it")


class TokenCreate(TokenScopes, TokenBase):
    expires_in_days: int | None = Field(
        default=90,
        ge=1,
        le=MAX_TOKEN_DAYS,
        description="null: never expires (not recommended). Asked for with an API token, the new token never "
        "outlives it: a later expiry, or null, is capped at the presenting token's expiry (see expires_at)",
    )


# the bases' order gives the serialised field order (pydantic orders fields from the last base to the first):
# id, name, prefix, scopes, then the dates
class TokenPublic(TokenScopes, TokenLabel):
    created_at: datetime
    expires_at: datetime | None
    revoked_at: datetime | None
    last_used_at: datetime | None

    @classmethod
    def of(cls, token: ApiToken) -> TokenPublic:
        return cls(
            id=token.id,
            name=token.name,
            prefix=token.prefix,
            scopes=token.scopes.split(),
            created_at=as_utc(token.created_at) or token.created_at,
            expires_at=as_utc(token.expires_at),
            revoked_at=as_utc(token.revoked_at),
            last_used_at=as_utc(token.last_used_at),
        )


class TokenCreated(TokenPublic):
    token: str = Field(description="the secret; shown only in this response, store it now")


class UserCreate(UserBase):
    password: str = Field(min_length=MIN_PASSWORD_LENGTH, max_length=MAX_PASSWORD_LENGTH)


class UserUpdate(BaseModel):
    email: SafeStr | None = Field(
        default=None,
        min_length=3,
        max_length=320,
        description="move the account to another e-mail (refused when taken or invited: 409 / 422)",
    )
    is_active: bool | None = Field(
        default=None, description="false: signs the user out and disables their tokens"
    )
    is_admin: bool | None = None
    password: str | None = Field(default=None, min_length=MIN_PASSWORD_LENGTH, max_length=MAX_PASSWORD_LENGTH)
