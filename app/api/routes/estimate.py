"""POST /api/v1/estimate: memory per pipeline stage and step time for one scenario.

Computes and stores nothing, so it needs no scope (saving a scenario is /api/v1/plans), and it reads the
catalog through the read-only database view (app/db.py). Naming a calibration `profile` (users' measurements)
needs plans:read, as listing them does: 401 anonymous, 403 for a credential without it.

Response cache: the encoded response is kept by the service layer (app/services/estimate.py, where its keying
and what may be stored are described). A hit is answered on the event loop with the stored bytes; a miss
resolves and computes in the thread pool (concurrent requests for the same scenario wait for the first one's
answer instead of computing it again).

A computation (a miss) holds one of the caller's CPU-heavy slots (app/hooks/inflight.py), so one caller
cannot run more than a few at once; hits need none.
"""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import APIRouter, Request, Response
from fastapi.concurrency import run_in_threadpool

from app.auth.deps import check_profile_use
from app.hooks import inflight
from app.schemas.estimate import EstimateOut
from app.schemas.scenario import Scenario
from app.services import estimate as svc

router = APIRouter(prefix="/estimate", tags=["estimate"])
# Routers are matched in turn and FastAPI's nested routers scan every route ahead of the match (~170 µs for
# this one behind the others, measured, docs/performance.md): the hottest route asks to be included first.
ROUTER_PRIORITY = 0

cache = svc.response_cache  # the service layer's response cache (tests read its counters)


@router.post(
    "",
    operation_id="estimate_create",
    response_model=EstimateOut,
    summary="Estimate per-GPU memory by pipeline stage and step time for a scenario",
    responses={
        401: {"description": "a calibration profile named without credentials (profiles need plans:read)"},
        403: {"description": "a calibration profile named by a credential without plans:read"},
        404: {"description": "unknown model or GPU name (with close matches)"},
        422: {"description": "inconsistent scenario: every problem listed with its field path"},
        429: {"description": "too many requests, or too many of this caller's computations in flight"},
    },
)
async def create_estimate(body: Scenario, request: Request) -> Response:
    if body.profile:  # a calibration profile is a user's measurement: plans:read (401/403), before the cache
        await run_in_threadpool(check_profile_use, request)
    key = svc.cache_key(body)
    hit = svc.cached_response(key)
    if hit is not None:
        return Response(content=hit, media_type="application/json")
    pending = _in_flight.get(key)
    if pending is not None:
        # The same scenario is being computed for another request: wait for it rather than computing it again
        # (a burst of identical cold requests costs one computation). If its answer could not be cached
        # (a user's row, a profile, an error), compute our own.
        await pending.wait()
        hit = svc.cached_response(key)
        if hit is not None:
            return Response(content=hit, media_type="application/json")
        return Response(content=await _compute_and_store(key, body, request), media_type="application/json")
    done = _in_flight[key] = asyncio.Event()
    try:
        content = await _compute_and_store(key, body, request)
    finally:
        done.set()
        if _in_flight.get(key) is done:
            del _in_flight[key]
    return Response(content=content, media_type="application/json")


_in_flight: dict[tuple[Any, ...], asyncio.Event] = {}


async def _compute_and_store(key: tuple[Any, ...], body: Scenario, request: Request) -> bytes:
    async with inflight.hold(request):
        content, may_cache, generation = await run_in_threadpool(svc.compute_encoded, body)
    svc.store_response(key, content, may_cache, generation)
    return content
