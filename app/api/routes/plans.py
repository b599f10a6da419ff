"""/api/v1/plans: saved plans with immutable revisions, sharing, compare and export.

Plans are private to their owner; app.services.plan_access holds the rules. A plan the caller may not read
is a 404; one they may read but not change is a 403.
"""

from __future__ import annotations

import uuid
from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Path, Query, Response, status
from fastapi.responses import JSONResponse, PlainTextResponse
from pydantic import Field

from app.api.envelope import PagingDep
from app.auth.deps import Principal, ReadDep, WriteDep
from app.deps import SameWithinPct, SessionDep
from app.schemas.envelope import ListEnvelope
from app.schemas.plans import (
    ComparisonPublic,
    ForbiddenOut,
    NotFoundOut,
    PlanCreate,
    PlanDuplicate,
    PlanExport,
    PlanPublic,
    PlanRevise,
    PlanSharingPublic,
    PlanSharingUpdate,
    PlanSummary,
    RevisionPublic,
    RevisionSummary,
)
from app.services import plans as plan_service
from app.services.plan_access import OwnerFilter, PlanActor

router = APIRouter(prefix="/plans", tags=["plans"])
MAX_REVISION = 2**31 - 1  # plan_revision.revision is a 32-bit INTEGER column (PostgreSQL integer)

NOT_FOUND: dict[int | str, dict[str, Any]] = {
    404: {"model": NotFoundOut, "description": "no such plan or revision, or one you may not read"}
}
CHANGE: dict[int | str, dict[str, Any]] = {
    **NOT_FOUND,
    403: {"model": ForbiddenOut, "description": "shared with you read-only: only the owner or an admin may"},
}
OWN: dict[int | str, dict[str, Any]] = {
    403: {"model": ForbiddenOut, "description": "the credential lacks the scope, or has no user account"},
}


def _actor(principal: Principal) -> PlanActor:
    return PlanActor.of(principal)


def _forbidden(exc: PermissionError) -> HTTPException:
    return HTTPException(status_code=status.HTTP_403_FORBIDDEN, detail=str(exc))


def _export_name(plan: RevisionPublic, ext: str) -> str:
    return f"plan-{plan.plan_id}-r{plan.revision}.{ext}"


@router.post(
    "",
    operation_id="create_plan",
    status_code=status.HTTP_201_CREATED,
    response_model=PlanPublic,
    responses=OWN,
    summary="Save a new plan (revision 1), private to you",
)
def create_plan(body: PlanCreate, session: SessionDep, principal: WriteDep, response: Response) -> PlanPublic:
    try:
        plan = plan_service.create_plan(session, body, _actor(principal))
    except PermissionError as exc:
        raise _forbidden(exc) from None
    response.headers["Location"] = f"/api/v1/plans/{plan.id}"
    return plan


@router.get(
    "",
    operation_id="list_plans",
    response_model=ListEnvelope[PlanSummary],
    summary="List the saved plans you may read",
)
def list_plans(
    session: SessionDep,
    principal: ReadDep,
    page: PagingDep,
    q: Annotated[str | None, Query(max_length=200, description="search in names and notes")] = None,
    owner: Annotated[
        OwnerFilter,
        Query(description="'mine': your own; 'shared': others' plans shared with you; 'all': both"),
    ] = "all",
) -> ListEnvelope[PlanSummary]:
    rows, count = plan_service.list_plans(session, _actor(principal), page.offset, page.limit, q, owner)
    return ListEnvelope[PlanSummary](data=rows, count=count)


@router.get(
    "/compare",
    responses=NOT_FOUND,
    operation_id="compare_plans",
    response_model=ComparisonPublic,
    summary="Compare 2 to 4 plans side by side",
)
def compare_plans(
    session: SessionDep,
    principal: ReadDep,
    ids: Annotated[list[uuid.UUID], Query(min_length=2, max_length=4, description="plan ids, 2 to 4")],
    revs: Annotated[
        list[Annotated[int, Field(le=MAX_REVISION)]] | None,
        Query(
            max_length=4,
            description="revision of each plan, in the order of ids (0 = latest); default latest",
        ),
    ] = None,
    same_within_pct: SameWithinPct = plan_service.SAME_WITHIN_PCT,
) -> ComparisonPublic:
    chosen: list[int | None] = [r or None for r in (revs or [])]
    return plan_service.compare_plans(session, list(ids), chosen, _actor(principal), same_within_pct)


@router.get(
    "/{plan_id}",
    operation_id="get_plan",
    responses=NOT_FOUND,
    response_model=PlanPublic,
    summary="A plan and its latest revision",
)
def get_plan(plan_id: uuid.UUID, session: SessionDep, principal: ReadDep) -> PlanPublic:
    return plan_service.get_plan(session, plan_id, _actor(principal))


@router.get(
    "/{plan_id}/sharing",
    operation_id="get_plan_sharing",
    responses=CHANGE,
    response_model=PlanSharingPublic,
    summary="Who may read a plan besides its owner and admins (owner or admin only)",
)
def get_sharing(plan_id: uuid.UUID, session: SessionDep, principal: ReadDep) -> PlanSharingPublic:
    try:
        return plan_service.get_plan_sharing(session, plan_id, _actor(principal))
    except PermissionError as exc:
        raise _forbidden(exc) from None


@router.put(
    "/{plan_id}/sharing",
    operation_id="set_plan_sharing",
    responses=CHANGE,
    response_model=PlanSharingPublic,
    summary="Share a plan read-only with everyone or with named users, or make it private (owner or admin only)",
)
def set_sharing(
    plan_id: uuid.UUID, body: PlanSharingUpdate, session: SessionDep, principal: WriteDep
) -> PlanSharingPublic:
    try:
        return plan_service.set_sharing(session, plan_id, body, _actor(principal))
    except PermissionError as exc:
        raise _forbidden(exc) from None


@router.post(
    "/{plan_id}/revisions",
    responses=CHANGE,
    operation_id="revise_plan",
    status_code=status.HTTP_201_CREATED,
    response_model=PlanPublic,
    summary="Update a plan: saved as a new immutable revision",
)
def revise_plan(plan_id: uuid.UUID, body: PlanRevise, session: SessionDep, principal: WriteDep) -> PlanPublic:
    try:
        return plan_service.add_revision(session, plan_id, body, _actor(principal))
    except PermissionError as exc:
        raise _forbidden(exc) from None


@router.put(
    "/{plan_id}",
    responses=CHANGE,
    operation_id="update_plan",
    response_model=PlanPublic,
    summary="Update a plan (same as POST …/revisions: a new revision, the old ones are kept)",
)
def update_plan(plan_id: uuid.UUID, body: PlanRevise, session: SessionDep, principal: WriteDep) -> PlanPublic:
    try:
        return plan_service.add_revision(session, plan_id, body, _actor(principal))
    except PermissionError as exc:
        raise _forbidden(exc) from None


@router.get(
    "/{plan_id}/revisions",
    responses=NOT_FOUND,
    operation_id="list_plan_revisions",
    response_model=ListEnvelope[RevisionSummary],
    summary="A plan's revisions, newest first",
)
def list_revisions(
    plan_id: uuid.UUID, session: SessionDep, principal: ReadDep, page: PagingDep
) -> ListEnvelope[RevisionSummary]:
    rows, count = plan_service.list_revisions(session, plan_id, _actor(principal), page.offset, page.limit)
    return ListEnvelope[RevisionSummary](data=rows, count=count)


@router.get(
    "/{plan_id}/revisions/{revision}",
    responses=NOT_FOUND,
    operation_id="get_plan_revision",
    response_model=RevisionPublic,
    summary="One revision of a plan",
)
def get_revision(
    plan_id: uuid.UUID,
    revision: Annotated[int, Path(ge=1, le=MAX_REVISION)],
    session: SessionDep,
    principal: ReadDep,
) -> RevisionPublic:
    return plan_service.get_revision(session, plan_id, revision, _actor(principal))


@router.post(
    "/{plan_id}/duplicate",
    responses={**NOT_FOUND, **OWN},
    operation_id="duplicate_plan",
    status_code=status.HTTP_201_CREATED,
    response_model=PlanPublic,
    summary="Copy a plan you may read into a new plan of your own (private)",
)
def duplicate_plan(
    plan_id: uuid.UUID, session: SessionDep, principal: WriteDep, body: PlanDuplicate | None = None
) -> PlanPublic:
    """The plan's latest revision saved again as yours: its inputs, builder choices and notes, evaluated at your
    prices (the built-in rows and your own, never the source owner's). Inputs that no longer evaluate (a catalog
    entry or calibration profile removed since) are a 422 naming the field, and nothing is saved."""
    try:
        return plan_service.duplicate_plan(session, plan_id, body or PlanDuplicate(), _actor(principal))
    except PermissionError as exc:
        raise _forbidden(exc) from None


@router.delete(
    "/{plan_id}",
    responses=CHANGE,
    operation_id="delete_plan",
    status_code=status.HTTP_204_NO_CONTENT,
    response_class=Response,
    summary="Delete a plan and all its revisions (owner or admin only)",
)
def delete_plan(plan_id: uuid.UUID, session: SessionDep, principal: WriteDep) -> Response:
    try:
        plan_service.delete_plan(session, plan_id, _actor(principal))
    except PermissionError as exc:
        raise _forbidden(exc) from None
    return Response(status_code=status.HTTP_204_NO_CONTENT)


# plan_revision.revision is a 32-bit INTEGER column: a larger number is a 422, not a database error
RevisionQuery = Annotated[
    int | None, Query(ge=1, le=MAX_REVISION, description="revision number; default: the latest")
]


@router.get(
    "/{plan_id}/export.json",
    operation_id="export_plan_json",
    summary="Export a revision as JSON with app version, formula version, price-book date and calibration profile",
    response_model=PlanExport,
    responses=NOT_FOUND,
)
def export_plan_json(
    plan_id: uuid.UUID, session: SessionDep, principal: ReadDep, revision: RevisionQuery = None
) -> JSONResponse:
    doc: dict[str, Any] = plan_service.export_json(session, plan_id, revision, _actor(principal))
    rev = doc["plan"]["revision"]
    return JSONResponse(
        doc, headers={"Content-Disposition": f'attachment; filename="plan-{plan_id}-r{rev}.json"'}
    )


@router.get(
    "/{plan_id}/export.csv",
    operation_id="export_plan_csv",
    summary="Export a revision as CSV (section, key, value, unit, source) with the same provenance",
    response_class=PlainTextResponse,
    responses={**NOT_FOUND, 200: {"content": {"text/csv": {}}}},
)
def export_plan_csv(
    plan_id: uuid.UUID, session: SessionDep, principal: ReadDep, revision: RevisionQuery = None
) -> Response:
    actor = _actor(principal)
    rev = plan_service.get_revision(session, plan_id, revision, actor)
    body = plan_service.export_csv(session, plan_id, rev.revision, actor)
    return Response(
        body,
        media_type="text/csv; charset=utf-8",
        headers={"Content-Disposition": f'attachment; filename="{_export_name(rev, "csv")}"'},
    )
