"""Request and response bodies of calibrated hardware profiles."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field

from app.schemas.fields import SafeStr


class ProfileKey(BaseModel):
    """The id of a calibration profile (the first field of every view of one)."""

    id: uuid.UUID


class ProfileBase(BaseModel):
    """A profile's name, as a fit gives it (ProfileFit) and as listed (ProfileSummary, ProfilePublic)."""

    name: SafeStr = Field(
        min_length=1,
        max_length=200,
        description="profile name; fitting again adds a version (a name belongs to whoever fitted it first)",
    )


class ProfileFit(ProfileBase):
    job_id: uuid.UUID = Field(description="a finished benchmark job (gemm, collectives or calibration)")
    gpu: SafeStr | None = Field(
        default=None, max_length=100, description="catalog GPU the node has (for the 'before' prediction)"
    )
    fabric: SafeStr | None = Field(
        default=None, max_length=100, description="fabric preset between nodes, e.g. ib-ndr-8x400"
    )
    override_acceptance: bool = Field(
        default=False,
        description="fit even though the measurements fail the node acceptance check for this GPU and fabric",
    )
    force: bool = Field(
        default=False,
        description="save the fit even though it does not improve the model on held-back points",
    )


# ProfileKey comes last among the bases so that `id` leads the serialised profile (pydantic orders fields from the
# last base to the first)
class ProfileSummary(ProfileBase, ProfileKey):
    version: int
    gpu_name: str
    gemm_dtypes: list[str] = Field(default_factory=list, description="dtypes with a fitted GEMM curve")
    fabric: str = Field(default="", description="fabric the profile was fitted for")
    measured_on: str = Field(default="", description="'cpu' for a benchmark run on CPU (gloo), else 'gpu'")
    source_job_id: uuid.UUID | None
    owner_id: uuid.UUID | None = Field(
        default=None,
        description="id of the user the profile name belongs to (the owner of its first version): only "
        "they or an admin add versions; null for names fitted before profiles had owners or by the CLI "
        "(admins only)",
    )
    created_at: datetime
    gemm_error_before_pct: float | None
    gemm_error_after_pct: float | None
    collectives_error_before_pct: float | None
    collectives_error_after_pct: float | None


class ProfilePublic(ProfileSummary):
    params: dict[str, Any]
    report: dict[str, Any]
