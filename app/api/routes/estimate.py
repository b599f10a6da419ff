"""POST /api/v1/estimate: memory per pipeline stage and step time for one scenario.

Computes and stores nothing, so it needs no scope (saving a scenario is /api/v1/plans).
"""

from __future__ import annotations

from fastapi import APIRouter

from app.api.deps import SessionDep
from app.schemas.estimate import EstimateOut
from app.schemas.scenario import Scenario
from app.services import estimate as svc

router = APIRouter(prefix="/estimate", tags=["estimate"])


@router.post(
    "",
    operation_id="estimate_create",
    response_model=EstimateOut,
    summary="Estimate per-GPU memory by pipeline stage and step time for a scenario",
    responses={
        404: {"description": "unknown model or GPU name (with close matches)"},
        422: {"description": "inconsistent scenario: every problem listed with its field path"},
    },
)
def create_estimate(body: Scenario, session: SessionDep) -> EstimateOut:
    resolved, est = svc.run(body, session)
    return svc.to_out(resolved, est)
