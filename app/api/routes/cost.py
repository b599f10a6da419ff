"""/api/v1/cost, /api/v1/goodput, /api/v1/storage: cost per run, TCO, breakeven, goodput and storage tiers.

These endpoints compute and store nothing, so they need no scope (an embedded scenario that names a calibration
profile needs plans:read, as the estimate does) and read through the read-only database view
(app/deps.py `ReadSessionDep`); every price and default used is echoed
with its date and source in the response's `assumptions`. Price rows are the caller's to see
(app.services.catalog_public.price_viewer): the built-in rows and their own, and a price_row_id naming another
user's row is as unknown as a missing one.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request

from app.api.envelope import PROFILE_AUTH_ERRORS
from app.auth.deps import PrincipalDep, check_profiles_in
from app.core import price_age
from app.deps import ReadSessionDep
from app.schemas import cost as s
from app.schemas.envelope import ListEnvelope
from app.services import cost as svc
from app.services import prices
from app.services.catalog_public import price_viewer

router = APIRouter()
cost_router = APIRouter(prefix="/cost", tags=["cost"])
goodput_router = APIRouter(prefix="/goodput", tags=["goodput"])
storage_router = APIRouter(prefix="/storage", tags=["storage"])


@cost_router.post(
    "/run",
    operation_id="cost_run",
    response_model=s.RunCostResponse,
    summary="Cost of one training run under each pricing option",
    responses=PROFILE_AUTH_ERRORS,
)
def cost_run(
    body: s.RunCostRequest, session: ReadSessionDep, request: Request, principal: PrincipalDep
) -> s.RunCostResponse:
    check_profiles_in(request, body.scenario)
    return svc.run_cost(session, body, viewer=price_viewer(principal))


@cost_router.post(
    "/tco",
    operation_id="cost_tco",
    response_model=s.TcoResponse,
    summary="On-prem total cost of ownership, $/GPU-hour, breakeven vs cloud, curves",
)
def cost_tco(body: s.TcoRequest, session: ReadSessionDep, principal: PrincipalDep) -> s.TcoResponse:
    return svc.tco(session, body, viewer=price_viewer(principal))


@cost_router.post(
    "/breakeven",
    operation_id="cost_breakeven",
    response_model=s.BreakevenResponse,
    summary="Breakeven months and utilisation of buying vs each cloud option",
)
def cost_breakeven(
    body: s.TcoRequest, session: ReadSessionDep, principal: PrincipalDep
) -> s.BreakevenResponse:
    return svc.breakeven(session, body, viewer=price_viewer(principal))


@cost_router.post(
    "/epoch",
    operation_id="cost_epoch",
    response_model=s.EpochResponse,
    summary="Epoch AI's three cost methods for a training run (arXiv 2405.21015)",
)
def cost_epoch(body: s.EpochRequest) -> s.EpochResponse:
    return svc.epoch(body)


@cost_router.post(
    "/spot",
    operation_id="cost_spot",
    response_model=s.SpotResponse,
    summary="Net savings of spot vs on-demand after preemptions",
)
def cost_spot(body: s.SpotRequest) -> s.SpotResponse:
    return svc.spot(body)


@cost_router.get(
    "/prices",
    operation_id="cost_list_prices",
    response_model=ListEnvelope[s.PriceBookRow],
    summary="The price book with each row's date, source and staleness",
)
def cost_list_prices(
    session: ReadSessionDep,
    principal: PrincipalDep,
    category: Annotated[str | None, Query(max_length=50, description="e.g. cloud_gpu")] = None,
    stale_only: Annotated[
        bool, Query(description=f"only the stale rows ({price_age.stale_rule()}; app.core.price_age)")
    ] = False,
) -> ListEnvelope[s.PriceBookRow]:
    rows = prices.price_book(session, category, stale_only, viewer=price_viewer(principal))
    return ListEnvelope(data=rows, count=len(rows))


@goodput_router.post(
    "",
    operation_id="goodput_estimate",
    response_model=s.GoodputResponse,
    summary="Interruptions, checkpoint interval (Young/Daly), restarts → goodput and effective MFU",
    responses=PROFILE_AUTH_ERRORS,
)
def goodput_estimate(body: s.GoodputRequest, session: ReadSessionDep, request: Request) -> s.GoodputResponse:
    check_profiles_in(request, body.scenario)
    return svc.goodput(body, session)


@goodput_router.get(
    "/presets",
    operation_id="goodput_presets",
    response_model=ListEnvelope[s.PresetOut],
    summary="Failure-rate presets from published training runs",
)
def goodput_presets() -> ListEnvelope[s.PresetOut]:
    rows = svc.presets()
    return ListEnvelope(data=rows, count=len(rows))


@storage_router.post(
    "",
    operation_id="storage_estimate",
    response_model=s.StorageResponse,
    summary="Checkpoint size and write time per tier (p99), data-loading bandwidth vs each tier",
    responses=PROFILE_AUTH_ERRORS,
)
def storage_estimate(body: s.StorageRequest, session: ReadSessionDep, request: Request) -> s.StorageResponse:
    check_profiles_in(request, body.scenario)
    return svc.storage(body, session)


router.include_router(cost_router)
router.include_router(goodput_router)
router.include_router(storage_router)
