"""Saved plans and their immutable revisions."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Column, String, UniqueConstraint
from sqlmodel import Field, SQLModel

from app.models.base import created_at_field, json_field, timestamp_field, uuid_pk


class Plan(SQLModel, table=True):
    __tablename__ = "plan"
    id: uuid.UUID = uuid_pk()
    name: str = Field(max_length=200)
    notes: str = Field(default="", max_length=20000)
    owner_id: uuid.UUID | None = Field(default=None, foreign_key="user_account.id", index=True)
    latest_revision: int = 0
    # Who may read it besides its owner and admins: "private" (nobody), "users" (the PlanShare rows),
    # "everyone" (every signed-in principal with plans:read). Sharing is read-only: only the owner or an
    # admin revises, renames or deletes.
    visibility: str = Field(
        default="private", sa_column=Column(String(20), nullable=False, server_default="private")
    )
    created_at: datetime = created_at_field()
    updated_at: datetime | None = timestamp_field()


class PlanShare(SQLModel, table=True):
    """A named user a plan is shared with, read-only (used when the plan's visibility is "users")."""

    __tablename__ = "plan_share"
    __table_args__ = (UniqueConstraint("plan_id", "user_id", name="uq_plan_share"),)
    id: uuid.UUID = uuid_pk()
    plan_id: uuid.UUID = Field(foreign_key="plan.id", index=True, ondelete="CASCADE")
    user_id: uuid.UUID = Field(foreign_key="user_account.id", index=True, ondelete="CASCADE")
    created_at: datetime = created_at_field()


class PlanInvite(SQLModel, table=True):
    """An e-mail a plan is shared with that has no account yet. It becomes a PlanShare when an account with
    that e-mail is created (app/auth/users.py claim_plan_invites), so that sharing answers the same whether
    or not an address has an account (no account enumeration through sharing)."""

    __tablename__ = "plan_invite"
    __table_args__ = (UniqueConstraint("plan_id", "email", name="uq_plan_invite"),)
    id: uuid.UUID = uuid_pk()
    plan_id: uuid.UUID = Field(foreign_key="plan.id", index=True, ondelete="CASCADE")
    email: str = Field(max_length=320, index=True)  # normalised, as user_account.email
    created_at: datetime = created_at_field()


class PlanRevision(SQLModel, table=True):
    """One immutable snapshot of a plan's scenario and its computed result."""

    __tablename__ = "plan_revision"
    __table_args__ = (UniqueConstraint("plan_id", "revision", name="uq_plan_revision"),)
    id: uuid.UUID = uuid_pk()
    plan_id: uuid.UUID = Field(foreign_key="plan.id", index=True, ondelete="CASCADE")
    revision: int
    name: str = Field(max_length=200)
    notes: str = Field(default="", max_length=20000)
    scenario: dict[str, Any] = json_field()
    result: dict[str, Any] = json_field()
    app_version: str = Field(max_length=50)
    formula_version: str = Field(max_length=50)
    price_book_date: str = Field(default="", max_length=20)
    calibration_profile: str = Field(default="", max_length=200)
    # The plan builder's choices beyond the scenario (planner mode, rank by, scaling mode, deadline, budget,
    # planner constraints; app.web.pages._builder.SAVED_CHOICES), so "edit in builder" reopens them; empty for a
    # revision saved through the API with a new scenario.
    builder_choices: dict[str, Any] = Field(
        default_factory=dict, sa_column=Column(JSON, nullable=False, server_default="{}")
    )
    author_id: uuid.UUID | None = Field(default=None, foreign_key="user_account.id")
    created_at: datetime = created_at_field()
