"""Network model API: collective times, scaling efficiency vs GPU count, fat-tree bill of materials, fabric presets.

These compute and store nothing, so they need no scope (like /api/v1/estimate) and read through the read-only
database view (app/deps.py `ReadSessionDep`); naming a calibration `profile` needs plans:read (401/403).
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request

from app.api.envelope import PROFILE_AUTH_ERRORS, paging
from app.auth.deps import PrincipalDep, check_profiles_in
from app.deps import ReadSessionDep
from app.schemas import network as net_schema
from app.schemas.envelope import ListEnvelope, Paging
from app.services import network as svc
from app.services.catalog_public import price_viewer

router = APIRouter(prefix="/network", tags=["network"])

ERRORS: dict[int | str, dict[str, Any]] = {
    404: {"description": "unknown GPU, fabric or calibration profile (with close matches)"},
    422: {"description": "inconsistent input: every problem listed with its field path"},
}
# the routes that take a calibration `profile`
PROFILE_ERRORS: dict[int | str, dict[str, Any]] = {**PROFILE_AUTH_ERRORS, **ERRORS}


@router.post(
    "/collective",
    operation_id="network_collective",
    response_model=net_schema.CollectiveResponse,
    summary="Time, algbw and busbw of one collective (or an nccl-tests style size sweep) on a cluster",
    responses=PROFILE_ERRORS,
)
def collective(
    body: net_schema.CollectiveIn, session: ReadSessionDep, request: Request
) -> net_schema.CollectiveResponse:
    check_profiles_in(request, body.profile)
    return svc.run_collective(body, session)


@router.post(
    "/scaling",
    operation_id="network_scaling",
    response_model=net_schema.ScalingResponse,
    summary="Exposed communication, scaling efficiency and time-to-train vs GPU count, fabrics side by side",
    responses=PROFILE_ERRORS,
)
def scaling(
    body: net_schema.ScalingIn, session: ReadSessionDep, request: Request
) -> net_schema.ScalingResponse:
    # a profile may be named at the top level or inside the scenario: both are users' measurements
    check_profiles_in(request, body.profile, body.scenario)
    return svc.run_scaling(body, session)


@router.post(
    "/bom",
    operation_id="network_bom",
    response_model=dict[str, Any],
    summary="Fat-tree bill of materials (switches per tier, cables, transceivers) and network capex",
    responses=ERRORS,
)
def bom(body: net_schema.BomIn, session: ReadSessionDep, principal: PrincipalDep) -> dict[str, Any]:
    return svc.run_bom(body, session, viewer=price_viewer(principal)).to_dict()


@router.get(
    "/fabrics",
    operation_id="network_fabrics_list",
    response_model=ListEnvelope[net_schema.FabricOut],
    summary="Fabric presets with their sources",
)
def fabrics(
    page: Annotated[Paging, Depends(paging)],
    # a filter on the preset's transport, compared with each preset's: the names are all shorter than 20
    transport: Annotated[
        str | None, Query(max_length=100, description="infiniband | roce | efa | ethernet_tcp")
    ] = None,
) -> ListEnvelope[net_schema.FabricOut]:
    rows = svc.list_fabrics(transport)
    return ListEnvelope(data=rows[page.offset : page.offset + page.limit], count=len(rows))
