"""/api/v1/plans: saved plans with immutable revisions, compare and export."""

from __future__ import annotations

import uuid
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Query, Response, status
from fastapi.responses import JSONResponse, PlainTextResponse

from app.api.deps import SessionDep
from app.api.envelope import ListEnvelope, Paging, paging
from app.auth.deps import Principal, require_scope
from app.core.errors import Problem, SpecError
from app.schemas.plans import (
    ComparisonPublic,
    NotFoundOut,
    PlanCreate,
    PlanDuplicate,
    PlanExport,
    PlanPublic,
    PlanRevise,
    PlanSummary,
    RevisionPublic,
    RevisionSummary,
)
from app.services import plans as plan_service

router = APIRouter(prefix="/plans", tags=["plans"])

NOT_FOUND: dict[int | str, dict[str, Any]] = {
    404: {"model": NotFoundOut, "description": "no such plan or revision"}
}

ReadDep = Annotated[Principal, Depends(require_scope("plans:read"))]
WriteDep = Annotated[Principal, Depends(require_scope("plans:write"))]
PagingDep = Annotated[Paging, Depends(paging)]


def _author(principal: Principal) -> uuid.UUID | None:
    return principal.user_id if isinstance(principal.user_id, uuid.UUID) else None


def _export_name(plan: RevisionPublic, ext: str) -> str:
    return f"plan-{plan.plan_id}-r{plan.revision}.{ext}"


@router.post(
    "",
    operation_id="create_plan",
    status_code=status.HTTP_201_CREATED,
    response_model=PlanPublic,
    summary="Save a new plan (revision 1)",
)
def create_plan(body: PlanCreate, session: SessionDep, principal: WriteDep, response: Response) -> PlanPublic:
    plan = plan_service.create_plan(session, body, _author(principal))
    response.headers["Location"] = f"/api/v1/plans/{plan.id}"
    return plan


@router.get(
    "", operation_id="list_plans", response_model=ListEnvelope[PlanSummary], summary="List saved plans"
)
def list_plans(
    session: SessionDep,
    _principal: ReadDep,
    page: PagingDep,
    q: Annotated[str | None, Query(max_length=200, description="search in names and notes")] = None,
) -> ListEnvelope[PlanSummary]:
    rows, count = plan_service.list_plans(session, page.offset, page.limit, q)
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
    _principal: ReadDep,
    ids: Annotated[list[uuid.UUID], Query(min_length=2, max_length=4, description="plan ids, 2 to 4")],
    revs: Annotated[
        list[int] | None,
        Query(
            max_length=4,
            description="revision of each plan, in the order of ids (0 = latest); default latest",
        ),
    ] = None,
) -> ComparisonPublic:
    if revs is not None and any(r < 0 for r in revs):
        raise SpecError([Problem("revs", "revision numbers are ≥ 1 (0 = the latest)")])
    chosen: list[int | None] = [r or None for r in (revs or [])]
    return plan_service.compare_plans(session, list(ids), chosen)


@router.get(
    "/{plan_id}",
    operation_id="get_plan",
    responses=NOT_FOUND,
    response_model=PlanPublic,
    summary="A plan and its latest revision",
)
def get_plan(plan_id: uuid.UUID, session: SessionDep, _principal: ReadDep) -> PlanPublic:
    return plan_service.get_plan(session, plan_id)


@router.post(
    "/{plan_id}/revisions",
    responses=NOT_FOUND,
    operation_id="revise_plan",
    status_code=status.HTTP_201_CREATED,
    response_model=PlanPublic,
    summary="Update a plan: saved as a new immutable revision",
)
def revise_plan(plan_id: uuid.UUID, body: PlanRevise, session: SessionDep, principal: WriteDep) -> PlanPublic:
    return plan_service.add_revision(session, plan_id, body, _author(principal))


@router.put(
    "/{plan_id}",
    responses=NOT_FOUND,
    operation_id="update_plan",
    response_model=PlanPublic,
    summary="Update a plan (same as POST …/revisions: a new revision, the old ones are kept)",
)
def update_plan(plan_id: uuid.UUID, body: PlanRevise, session: SessionDep, principal: WriteDep) -> PlanPublic:
    return plan_service.add_revision(session, plan_id, body, _author(principal))


@router.get(
    "/{plan_id}/revisions",
    responses=NOT_FOUND,
    operation_id="list_plan_revisions",
    response_model=ListEnvelope[RevisionSummary],
    summary="A plan's revisions, newest first",
)
def list_revisions(
    plan_id: uuid.UUID, session: SessionDep, _principal: ReadDep, page: PagingDep
) -> ListEnvelope[RevisionSummary]:
    rows, count = plan_service.list_revisions(session, plan_id, page.offset, page.limit)
    return ListEnvelope[RevisionSummary](data=rows, count=count)


@router.get(
    "/{plan_id}/revisions/{revision}",
    responses=NOT_FOUND,
    operation_id="get_plan_revision",
    response_model=RevisionPublic,
    summary="One revision of a plan",
)
def get_revision(
    plan_id: uuid.UUID, revision: Annotated[int, Path(ge=1)], session: SessionDep, _principal: ReadDep
) -> RevisionPublic:
    return plan_service.get_revision(session, plan_id, revision)


@router.post(
    "/{plan_id}/duplicate",
    responses=NOT_FOUND,
    operation_id="duplicate_plan",
    status_code=status.HTTP_201_CREATED,
    response_model=PlanPublic,
    summary="Copy a plan's latest revision into a new plan",
)
def duplicate_plan(
    plan_id: uuid.UUID, session: SessionDep, principal: WriteDep, body: PlanDuplicate | None = None
) -> PlanPublic:
    return plan_service.duplicate_plan(session, plan_id, body or PlanDuplicate(), _author(principal))


@router.delete(
    "/{plan_id}",
    responses=NOT_FOUND,
    operation_id="delete_plan",
    status_code=status.HTTP_204_NO_CONTENT,
    response_class=Response,
    summary="Delete a plan and all its revisions",
)
def delete_plan(plan_id: uuid.UUID, session: SessionDep, _principal: WriteDep) -> Response:
    plan_service.delete_plan(session, plan_id)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


RevisionQuery = Annotated[int | None, Query(ge=1, description="revision number; default: the latest")]


@router.get(
    "/{plan_id}/export.json",
    operation_id="export_plan_json",
    summary="Export a revision as JSON with app version, formula version, price-book date and calibration profile",
    response_model=PlanExport,
    responses=NOT_FOUND,
)
def export_plan_json(
    plan_id: uuid.UUID, session: SessionDep, _principal: ReadDep, revision: RevisionQuery = None
) -> JSONResponse:
    doc: dict[str, Any] = plan_service.export_json(session, plan_id, revision)
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
    plan_id: uuid.UUID, session: SessionDep, _principal: ReadDep, revision: RevisionQuery = None
) -> Response:
    rev = plan_service.get_revision(session, plan_id, revision)
    body = plan_service.export_csv(session, plan_id, rev.revision)
    return Response(
        body,
        media_type="text/csv; charset=utf-8",
        headers={"Content-Disposition": f'attachment; filename="{_export_name(rev, "csv")}"'},
    )
