"""Who may read and who may change a saved plan: the sharing rules, as pure functions and one SQL filter.

A plan is private to its owner. Its owner may share it read-only with everyone (every caller holding
plans:read) or with named users (PlanShare rows, visibility "users"). Only the owner or an administrator
revises, renames, changes the sharing of, or deletes a plan. Reading (get, list, revisions, compare,
export, duplicate into a copy of one's own) needs read access: owner, administrator, or shared.
A plan without an owner (saved before plans had owners) is readable and changeable by administrators only,
unless an administrator shares it.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, get_args

from sqlalchemy import and_, exists, false, or_, true
from sqlmodel import col, select

from app.models.plans import Plan, PlanShare

if TYPE_CHECKING:
    from app.auth.deps import Principal

Visibility = Literal["private", "users", "everyone"]
# The values app/models/plans.py documents for Plan.visibility (migration sec01).
VISIBILITIES: tuple[str, ...] = get_args(Visibility)


@dataclass(frozen=True)
class PlanActor:
    """Who is asking: their user id (None for a credential without a user account) and whether they are an
    administrator."""

    user_id: uuid.UUID | None = None
    is_admin: bool = False

    @classmethod
    def of(cls, principal: Principal) -> PlanActor:
        user_id = principal.user_id if isinstance(principal.user_id, uuid.UUID) else None
        return cls(user_id=user_id, is_admin=principal.has("admin"))


class PlanChangeForbidden(PermissionError):
    """The caller may read the plan but not change it (a 403, unlike an unreadable plan, which is a 404)."""

    def __init__(self, plan_id: uuid.UUID, action: str) -> None:
        self.plan_id = plan_id
        self.action = action
        super().__init__(
            f"plan {plan_id} is shared with you read-only: only its owner or an administrator may {action} it; "
            "duplicate it to get a copy of your own"
        )


class NoAccountError(PermissionError):
    """A credential without a user account (e.g. a node token) cannot own plans."""

    def __init__(self) -> None:
        super().__init__("this credential does not belong to a user account, so it cannot own plans")


def is_owner(plan: Plan, actor: PlanActor) -> bool:
    return plan.owner_id is not None and plan.owner_id == actor.user_id


def may_change(plan: Plan, actor: PlanActor) -> bool:
    """Revise, rename, change sharing, delete: the owner or an administrator."""
    return actor.is_admin or is_owner(plan, actor)


def may_read(plan: Plan, actor: PlanActor, shared_with_actor: bool) -> bool:
    """`shared_with_actor`: whether a PlanShare row names the actor (only counts under visibility "users")."""
    if may_change(plan, actor):
        return True
    if plan.visibility == "everyone":
        return True
    return plan.visibility == "users" and shared_with_actor and actor.user_id is not None


def readable_clause(actor: PlanActor) -> Any:
    """A WHERE clause on Plan selecting exactly the plans `may_read` allows the actor."""
    if actor.is_admin:
        return true()
    everyone = col(Plan.visibility) == "everyone"
    if actor.user_id is None:
        return everyone
    named = exists(
        select(PlanShare.id).where(
            col(PlanShare.plan_id) == col(Plan.id), col(PlanShare.user_id) == actor.user_id
        )
    )
    return or_(
        col(Plan.owner_id) == actor.user_id,
        everyone,
        and_(col(Plan.visibility) == "users", named),
    )


OwnerFilter = Literal["all", "mine", "shared"]
# "all": every plan the caller may read; "mine": the caller's own; "shared": readable, owned by someone else
OWNER_FILTERS: tuple[str, ...] = get_args(OwnerFilter)


def owner_clause(actor: PlanActor, owner: OwnerFilter) -> Any:
    """The list's owner filter, on top of `readable_clause`."""
    if owner == "all":
        return true()
    if actor.user_id is None:
        return false() if owner == "mine" else true()  # owns nothing: everything readable is shared
    mine = col(Plan.owner_id) == actor.user_id
    if owner == "mine":
        return mine
    return or_(col(Plan.owner_id).is_(None), col(Plan.owner_id) != actor.user_id)
