"""POST /api/v1/estimate: memory per pipeline stage and step time for one scenario.

Computes and stores nothing, so it needs no scope (saving a scenario is /api/v1/plans), and it reads the
catalog through the read-only database view (app/db.py).

Response cache. The estimate is a pure function of the validated scenario and the formulas, so the encoded
response is kept in a bounded in-process LRU (`CACHE_SIZE` entries) keyed by the scenario's canonical JSON
(sorted keys, every default filled in), the formula version and the database. A response is stored only
when nothing in it can change without a restart: the scenario names no calibration profile (profiles are
users' rows) and its model and GPU are inline specs or built-in catalog entries that no user's row can
replace (`app.services.catalog.is_clean_builtin`). Entries also carry the catalog generation, which moves on
every GPU/model/interconnect write in this process, and are ignored once it has moved. A hit is answered on
the event loop with the stored bytes; a miss resolves and computes in the thread pool (concurrent requests
for the same scenario wait for the first one's answer instead of computing it again). Both are encoded the
same way (pydantic's JSON encoding of EstimateOut, as FastAPI itself does), so hits and misses are
byte-identical.

A computation (a miss) holds one of the caller's CPU-heavy slots (app/hooks/inflight.py), so one caller
cannot run more than a few at once; hits need none.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections import OrderedDict
from typing import Any

from fastapi import APIRouter, Request, Response
from fastapi.concurrency import run_in_threadpool
from sqlmodel import Session

import app as app_pkg
from app.db import get_engine, get_read_engine
from app.hooks import inflight
from app.schemas.estimate import EstimateOut
from app.schemas.scenario import Scenario
from app.services import catalog as catalog_svc
from app.services import estimate as svc

router = APIRouter(prefix="/estimate", tags=["estimate"])
# Routers are matched in turn and FastAPI's nested routers scan every route ahead of the match (~170 µs for
# this one behind the others, measured, docs/performance.md): the hottest route asks to be included first.
ROUTER_PRIORITY = 0

CACHE_SIZE = 1024  # responses are ~7 KB: at most ~7 MB


class ResponseCache:
    """A thread-safe LRU of encoded responses, each stored with the catalog generation it was computed at."""

    def __init__(self, size: int = CACHE_SIZE) -> None:
        self.size = size
        self._items: OrderedDict[tuple[Any, ...], tuple[int, bytes]] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def get(self, key: tuple[Any, ...], generation: int) -> bytes | None:
        with self._lock:
            item = self._items.get(key)
            if item is None or item[0] != generation:
                self.misses += 1
                return None
            self._items.move_to_end(key)
            self.hits += 1
            return item[1]

    def put(self, key: tuple[Any, ...], generation: int, content: bytes) -> None:
        with self._lock:
            self._items[key] = (generation, content)
            self._items.move_to_end(key)
            while len(self._items) > self.size:
                self._items.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self.hits = self.misses = 0

    def __len__(self) -> int:
        return len(self._items)


cache = ResponseCache()


def canonical_json(body: Scenario) -> str:
    """The validated scenario as JSON with every default filled in and a fixed key order.

    Pydantic dumps model fields in declaration order, so only free-form objects (inline model, GPU or fabric
    specs) can arrive in another key order: those scenarios go through a sorted-keys dump instead.
    """
    inline = not isinstance(body.model, str) or not isinstance(body.cluster.gpu, str)
    if inline or isinstance(body.cluster.fabric, dict):
        return json.dumps(body.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
    return body.model_dump_json()


def cache_key(body: Scenario) -> tuple[Any, ...]:
    return (app_pkg.FORMULA_VERSION, get_engine().url, canonical_json(body))


def cacheable(body: Scenario, session: Session) -> bool:
    """No calibration profile, and model and GPU are inline or clean built-in catalog entries."""
    if body.profile:
        return False
    names = [("model", body.model), ("gpu", body.cluster.gpu)]
    return all(
        catalog_svc.is_clean_builtin(session, kind, name) for kind, name in names if isinstance(name, str)
    )


def encode(out: EstimateOut) -> bytes:
    return out.model_dump_json(by_alias=True).encode()


def compute(body: Scenario) -> tuple[bytes, bool, int]:
    """Resolve and estimate (sync, in the thread pool): the encoded response, whether it may be cached,
    and the catalog generation read before anything was resolved.

    The session is the read-only engine view (it writes nothing; on SQLite it never takes the write lock)
    and is opened and closed in this thread, so a cache hit needs no session at all.
    """
    generation = catalog_svc.catalog_generation()
    with Session(get_read_engine()) as session:
        may_cache = cacheable(body, session)
        resolved, est = svc.run(body, session)
    return encode(svc.to_out(resolved, est)), may_cache, generation


@router.post(
    "",
    operation_id="estimate_create",
    response_model=EstimateOut,
    summary="Estimate per-GPU memory by pipeline stage and step time for a scenario",
    responses={
        404: {"description": "unknown model or GPU name (with close matches)"},
        422: {"description": "inconsistent scenario: every problem listed with its field path"},
        429: {"description": "too many requests, or too many of this caller's computations in flight"},
    },
)
async def create_estimate(body: Scenario, request: Request) -> Response:
    key = cache_key(body)
    hit = cache.get(key, catalog_svc.catalog_generation())
    if hit is not None:
        return Response(content=hit, media_type="application/json")
    pending = _in_flight.get(key)
    if pending is not None:
        # The same scenario is being computed for another request: wait for it rather than computing it again
        # (a burst of identical cold requests costs one computation). If its answer could not be cached
        # (a user's row, a profile, an error), compute our own.
        await pending.wait()
        hit = cache.get(key, catalog_svc.catalog_generation())
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
        content, may_cache, generation = await run_in_threadpool(compute, body)
    if may_cache and generation == catalog_svc.catalog_generation():
        cache.put(key, generation, content)
    return content
