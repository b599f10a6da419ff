"""Request and response models for saved plans (API, web and export share them)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_serializer, field_validator

from app.schemas.scenario import Scenario


def _utc(value: datetime | None) -> datetime | None:
    if value is None:
        return None
    return value if value.tzinfo else value.replace(tzinfo=UTC)


class PlanCreate(BaseModel):
    """A new plan: its first revision is computed from `scenario` and saved with it."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=200, description="short name shown in lists")
    notes: str = Field(default="", max_length=20000, description="free text: purpose, decisions, caveats")
    scenario: Scenario = Field(description="the planning inputs, as for the estimate endpoint")
    calibration_profile: str | None = Field(
        default=None,
        max_length=200,
        description="calibration profile ('name', 'name v3' or id) replacing the published efficiency "
        "curves; default: published defaults",
    )

    @field_validator("name")
    @classmethod
    def _name_not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("name must not be blank")
        return value.strip()


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


class PlanSummary(BaseModel):
    id: uuid.UUID
    name: str
    notes: str
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
    current: RevisionPublic = Field(description="the latest revision")


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
    differs: bool


class ComparisonPublic(BaseModel):
    plans: list[ComparisonColumn]
    rows: list[ComparisonRow]
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
