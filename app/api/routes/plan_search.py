"""POST /api/v1/plan (layout search) and POST /api/v1/plan/sizes ("how many GPUs do I need").

Both compute and store nothing; a search costs up to a second of CPU, so they ask for the `plans:read` scope
(saved plans live under /api/v1/plans), read the catalog through the read-only database view (on SQLite they
never take the write lock, so plan saves go on while searches run), and each caller may have only a few of
them in flight (app/hooks/inflight.py).
"""

from __future__ import annotations

from fastapi import APIRouter

from app.auth.deps import ReadDep
from app.deps import ReadSessionDep
from app.services import planner as svc

router = APIRouter(prefix="/plan", tags=["plan-search"])

ERRORS: dict[int | str, dict[str, str]] = {
    404: {"description": "unknown model, GPU or fabric name (with close matches)"},
    422: {"description": "inconsistent request: every problem listed with its field path"},
}


@router.post(
    "",
    operation_id="plan_search",
    response_model=svc.PlanOut,
    summary="Search every parallel layout, rank by time to train or cost, Pareto front and rejections",
    responses=ERRORS,
)
def plan_search(body: svc.PlanRequest, session: ReadSessionDep, _principal: ReadDep) -> svc.PlanOut:
    return svc.search(body, session)


@router.post(
    "/sizes",
    operation_id="plan_sizes",
    response_model=svc.SizesOut,
    summary="Sweep cluster sizes: time to train, cost per run, scaling efficiency, deadline, cheapest, knee",
    responses=ERRORS,
)
def plan_sizes(body: svc.SizesRequest, session: ReadSessionDep, _principal: ReadDep) -> svc.SizesOut:
    return svc.sizes(body, session)
