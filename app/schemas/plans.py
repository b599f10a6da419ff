"""Request and response models for saved plans (API, web and export share them)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_serializer, field_validator

from app.schemas.fields import SafeStr
from app.schemas.scenario import Scenario

Visibility = Literal["private", "users", "everyone"]  # Plan.visibility (app/models/plans.py)
MAX_SHARED_USERS = 200  # a bound on one request's list; sharing wider than this is what "everyone" is for


def _utc(value: datetime | None) -> datetime | None:
    if value is None:
        return None
    return value if value.tzinfo else value.replace(tzinfo=UTC)


class PlanKey(BaseModel):
    """The id of a saved plan (the first field of every view of one)."""

    id: uuid.UUID


class PlanBase(BaseModel):
    """A saved plan's name and notes, as given (PlanCreate) and as read back (PlanSummary, PlanPublic)."""

    name: str = Field(min_length=1, max_length=200, description="short name shown in lists")
    notes: str = Field(default="", max_length=20000, description="free text: purpose, decisions, caveats")

    @field_validator("name")
    @classmethod
    def _name_not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("name must not be blank")
        return value.strip()


class PlanCreate(PlanBase):
    """A new plan: its first revision is computed from `scenario` and saved with it."""

    model_config = ConfigDict(extra="forbid")

    scenario: Scenario = Field(description="the planning inputs, as for the estimate endpoint")
    calibration_profile: str | None = Field(
        default=None,
        max_length=200,
        description="calibration profile ('name', 'name v3' or id) replacing the published efficiency "
        "curves; default: published defaults",
    )


class PlanRevise(BaseModel):
    """An edit: saved as a new immutable revision; omitted fields keep the previous revision's value."""

    model_config = ConfigDict(extra="forbid")

    name: str | None = Field(default=None, min_length=1, max_length=200)
    notes: str | None = Field(default=None, max_length=20000)
    scenario: Scenario | None = Field(default=None, description="new inputs; omitted → the latest revision's")
    calibration_profile: str | None = Field(
        default=None, max_length=200, description="omitted → the latest revision's profile"
    )

    @field_validator("name")
    @classmethod
    def _name_not_blank(cls, value: str | None) -> str | None:
        if value is not None and not value.strip():
            raise ValueError("name must not be blank")
        return value.strip() if value is not None else None


class PlanDuplicate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str | None = Field(default=None, min_length=1, max_length=200, description="default: 'Copy of …'")


class Provenance(BaseModel):
    """What produced a revision's numbers: exported with every plan."""

    app_version: str
    formula_version: str
    price_book_date: str = Field(description="ISO date of the newest price-book row used; empty when none")
    calibration_profile: str = Field(
        description="hardware profile used; 'published defaults' when uncalibrated"
    )


class RevisionPublic(Provenance):
    id: uuid.UUID
    plan_id: uuid.UUID
    revision: int = Field(ge=1)
    name: str
    notes: str
    scenario: dict[str, Any]
    result: dict[str, Any]
    builder_choices: dict[str, Any] = Field(
        default_factory=dict,
        description="the plan builder's choices this revision was saved with beyond the scenario (mode, rank_by, "
        "scaling_mode, deadline_days, budget_usd, planner constraints); empty when saved through the API",
    )
    author_id: uuid.UUID | None = None
    created_at: datetime

    @field_serializer("created_at")
    def _ser_created(self, value: datetime) -> str:
        return _utc(value).isoformat()  # type: ignore[union-attr]


class RevisionSummary(BaseModel):
    revision: int
    name: str
    created_at: datetime
    summary: dict[str, Any] = Field(default_factory=dict, description="headline figures of this revision")

    @field_serializer("created_at")
    def _ser_created(self, value: datetime) -> str:
        return _utc(value).isoformat()  # type: ignore[union-attr]


# PlanKey comes last among the bases so that `id` leads the serialised plan (pydantic orders fields from the last
# base to the first)
class PlanSummary(PlanBase, PlanKey):
    owner: str | None = Field(
        default=None, description="the owner's e-mail; null for a plan saved before plans had owners"
    )
    visibility: Visibility = Field(
        default="private",
        description="who may read it besides its owner and administrators: nobody ('private'), the users in "
        "shared_with ('users'), every caller with plans:read ('everyone')",
    )
    may_change: bool = Field(
        default=False,
        description="whether the caller may revise, rename, share or delete it (its owner or an administrator)",
    )
    latest_revision: int
    created_at: datetime
    updated_at: datetime | None = None
    summary: dict[str, Any] = Field(
        default_factory=dict, description="headline figures of the latest revision"
    )

    @field_serializer("created_at", "updated_at")
    def _ser_times(self, value: datetime | None) -> str | None:
        v = _utc(value)
        return v.isoformat() if v else None


class PlanPublic(PlanSummary):
    shared_with: list[str] | None = Field(
        default=None,
        description="e-mails of the users it is shared with (read-only); shown to its owner and "
        "administrators, null for other readers",
    )
    current: RevisionPublic = Field(description="the latest revision")


class PlanSharingUpdate(BaseModel):
    """Who may read a plan besides its owner and administrators; replaces the previous sharing."""

    model_config = ConfigDict(extra="forbid")

    visibility: Visibility = Field(
        description="'private': nobody; 'users': the users listed in `users`; 'everyone': every caller with "
        "plans:read"
    )
    users: list[Annotated[SafeStr, Field(max_length=320)]] = Field(  # an e-mail, as user_account.email
        default_factory=list,
        max_length=MAX_SHARED_USERS,
        description="e-mails to share with, read-only (only with visibility 'users'); an e-mail without an "
        "account yet is kept and takes effect when that account is created",
    )


class PlanSharingPublic(BaseModel):
    plan_id: uuid.UUID
    owner: str | None = Field(description="the owner's e-mail; null for a plan without an owner")
    visibility: Visibility
    shared_with: list[str] = Field(description="e-mails of the users it is shared with, sorted")


class ForbiddenOut(BaseModel):
    """Body of a 403: why the caller may not do this."""

    detail: str


class ComparisonColumn(BaseModel):
    plan_id: uuid.UUID
    name: str
    revision: int


class ComparisonRow(BaseModel):
    key: str = Field(description="dotted path of the field in the scenario or result summary")
    label: str
    unit: str = ""
    section: str
    values: list[Any]
    deltas: list[float | None] = Field(
        description="each value minus the first plan's (null for the first plan and for values that are not numbers)"
    )
    percents: list[float | None] = Field(
        description="each value's change against the first plan's, in per cent (null where deltas is, or the first "
        "value is zero)"
    )
    differs: bool = Field(
        description="inputs and provenance: the values are not equal; results: some value moves by more than "
        "same_within_pct per cent against the first plan"
    )


class ComparisonPublic(BaseModel):
    plans: list[ComparisonColumn]
    rows: list[ComparisonRow]
    same_within_pct: float = Field(
        description="results that move by at most this many per cent count as the same"
    )
    differences: int = Field(description="number of rows whose values differ")
    ranking_note: str | None = Field(
        default=None,
        description="for plans of one model on the same GPUs with different layouts: whether their estimated "
        "speeds differ by more than the estimator's ranking resolution (docs/validation.md)",
    )


class NotFoundOut(BaseModel):
    """Body of a 404: what was looked up, and close matches when there are any."""

    detail: str
    kind: str
    name: str
    suggestions: list[str] = Field(default_factory=list)


class ExportedPlan(BaseModel):
    id: uuid.UUID
    name: str
    notes: str
    revision: int
    created_at: str = Field(description="UTC, ISO 8601")


class PlanExport(Provenance):
    """One revision as exported: the inputs, the complete result and what produced it."""

    format: str = Field(description="always 'clusterplan-plan'")
    format_version: int
    exported_at: str = Field(description="UTC, ISO 8601")
    exported_by_app_version: str
    plan: ExportedPlan
    scenario: dict[str, Any]
    result: dict[str, Any]


class RevisionForm(BaseModel):
    """The fields of the builder's save form (a new plan or a revision): `inputs` is the builder's query as typed,
    so a save that fails reopens the builder with the user's values."""

    name: str = Field(default="", max_length=200)
    notes: str = Field(default="", max_length=20000)
    scenario: str = Field(default="", max_length=400_000)
    calibration_profile: str = Field(default="", max_length=200)
    builder: str = Field(default="", max_length=2000)
    inputs: str = Field(default="", max_length=1_000_000)
