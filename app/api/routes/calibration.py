"""/api/v1/calibration: calibrated hardware profiles (named, versioned) and their predicted-vs-measured reports."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, HTTPException, Path, Query, Response, status

from app.api.envelope import PagingDep
from app.auth.deps import ReadDep, RunDep, principal_user_id
from app.calibration.profile import measured_on_cpu
from app.deps import SessionDep
from app.models.base import as_utc
from app.models.benchmarks import CalibrationProfile
from app.schemas.calibration import ProfileFit, ProfilePublic, ProfileSummary
from app.schemas.envelope import ListEnvelope
from app.services import calibration as calibration_service
from app.services import jobs as job_service

router = APIRouter(prefix="/calibration", tags=["calibration"])
MAX_VERSION = 2**31 - 1  # calibration_profile.version is a 32-bit INTEGER column (PostgreSQL integer)


def summary_of(p: CalibrationProfile) -> ProfileSummary:
    gemm = p.report.get("gemm") or {}
    coll = p.report.get("collectives") or {}
    return ProfileSummary(
        id=p.id,
        name=p.name,
        version=p.version,
        gpu_name=p.gpu_name,
        gemm_dtypes=sorted(p.params.get("gemm") or {}),
        fabric=str(p.params.get("fabric") or ""),
        measured_on=str(p.params.get("measured_on") or ("cpu" if measured_on_cpu(p.params) else "")),
        source_job_id=p.source_job_id,
        owner_id=p.owner_id,
        created_at=as_utc(p.created_at),  # type: ignore[arg-type]
        gemm_error_before_pct=gemm.get("error_before_pct"),
        gemm_error_after_pct=gemm.get("error_after_pct"),
        collectives_error_before_pct=coll.get("error_before_pct"),
        collectives_error_after_pct=coll.get("error_after_pct"),
    )


def public_of(p: CalibrationProfile) -> ProfilePublic:
    return ProfilePublic(**summary_of(p).model_dump(), params=p.params, report=p.report)


@router.get(
    "/profiles",
    operation_id="list_calibration_profiles",
    response_model=ListEnvelope[ProfileSummary],
    summary="Calibrated hardware profiles, every version",
)
def list_profiles(session: SessionDep, _p: ReadDep, page: PagingDep) -> ListEnvelope[ProfileSummary]:
    rows, count = calibration_service.list_profiles(session, page.offset, page.limit)
    return ListEnvelope[ProfileSummary](data=[summary_of(p) for p in rows], count=count)


@router.get(
    "/profiles/{ref}",
    operation_id="get_calibration_profile",
    response_model=ProfilePublic,
    summary="One profile (id, or name = latest version) with its predicted-vs-measured report",
)
def get_profile(
    # a profile's UUID, or its name (calibration_profile.name: max_length=200, as ProfileFit.name)
    ref: Annotated[str, Path(max_length=200)],
    session: SessionDep,
    _p: ReadDep,
    version: Annotated[
        int | None, Query(ge=1, le=MAX_VERSION, description="a version of a named profile")
    ] = None,
) -> ProfilePublic:
    return public_of(calibration_service.get_profile(session, ref, version))


@router.post(
    "/profiles",
    operation_id="fit_calibration_profile",
    status_code=status.HTTP_201_CREATED,
    response_model=ProfilePublic,
    summary="Fit a new profile version from a finished job's results",
    responses={
        403: {"description": "the job is another user's, or the profile name belongs to another user"}
    },
)
def fit_profile(
    body: ProfileFit, session: SessionDep, principal: RunDep, response: Response
) -> ProfilePublic:
    """Fit the job's rows as the next version of `name`: the caller must have created the job and own the
    name (a new name becomes theirs), unless they are an admin; otherwise 403."""
    job = job_service.get_job(session, body.job_id)
    fitter = calibration_service.Fitter(principal_user_id(principal), principal.has("admin"))
    try:
        profile = calibration_service.fit_profile_from_job(
            session, job, body.name, body.gpu, body.fabric, body.override_acceptance, body.force, fitter
        )
    except calibration_service.ProfileForbiddenError as exc:
        raise HTTPException(status_code=403, detail=str(exc)) from exc
    response.headers["Location"] = f"/api/v1/calibration/profiles/{profile.id}"
    return public_of(profile)
