"""User accounts and personal API tokens."""

from __future__ import annotations

import uuid
from datetime import datetime

from sqlalchemy import Column, Integer
from sqlmodel import Field, SQLModel

from app.models.base import created_at_field, timestamp_field, uuid_pk


class UserAccount(SQLModel, table=True):
    __tablename__ = "user_account"
    id: uuid.UUID = uuid_pk()
    email: str = Field(max_length=320, unique=True, index=True)
    password_hash: str = Field(max_length=500)
    is_admin: bool = False
    is_active: bool = True
    # Sealed into every session cookie; bumping it (logout, password change) revokes all the user's cookies.
    session_version: int = Field(default=0, sa_column=Column(Integer, nullable=False, server_default="0"))
    created_at: datetime = created_at_field()


class ApiToken(SQLModel, table=True):
    """A personal API token: only its hash is stored; the prefix lets users recognise it."""

    __tablename__ = "api_token"
    id: uuid.UUID = uuid_pk()
    user_id: uuid.UUID = Field(foreign_key="user_account.id", index=True, ondelete="CASCADE")
    name: str = Field(max_length=200)
    prefix: str = Field(max_length=32, index=True)
    token_hash: str = Field(max_length=128, unique=True)
    scopes: str = Field(default="", max_length=500)  # space-separated
    created_at: datetime = created_at_field()
    expires_at: datetime | None = timestamp_field()
    revoked_at: datetime | None = timestamp_field()
    last_used_at: datetime | None = timestamp_field()


class LoginThrottle(SQLModel, table=True):
    """Failed sign-ins per (account, client address): the next attempt waits an exponentially growing delay.

    Keyed per account *and* address, so one proxy's users do not share a budget and nobody can lock a chosen
    account out from elsewhere; kept in the database so every worker sees the same state.
    """

    __tablename__ = "login_throttle"
    key: str = Field(primary_key=True, max_length=400)  # "<email>|<address>"
    failures: int = 0
    last_failure_at: datetime | None = timestamp_field()
    blocked_until: datetime | None = timestamp_field()
